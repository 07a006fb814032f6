//! The workload advisor: a described job in, a recommended shape out, applied to the booking
//! form on request.

use super::{advise_workload, Form, INPUT};
use crate::components::errors::ErrorPanel;
use crate::pages::CARD;
use leptos::prelude::*;
use tenantry_domain::advisor::{Advice, ChosenShape, Note, Precision, WorkloadInput};
use tenantry_domain::reservation::Workload;
use tenantry_domain::Offering;

/// A workload kind in words.
pub(super) fn workload_label(w: Workload) -> &'static str {
    match w {
        Workload::PreTraining => "Pre-training",
        Workload::FineTuning => "Fine-tuning",
        Workload::Inference => "Inference serving",
        Workload::Development => "Development",
    }
}

/// The workload advisor: describe the job, get a shape with its reasons and warnings (and the
/// warnings of the shape the booking form holds now), and "Apply" it to the booking form. The
/// advice is asked for with a button (an action, not a resource), so nothing of it is rendered
/// on the server and hydration has nothing to disagree about.
#[component]
pub(super) fn AdvisorPanel(
    form: Form,
    asked: RwSignal<Option<String>>,
    offering: Signal<Option<Offering>>,
) -> impl IntoView {
    let workload = RwSignal::new(Workload::FineTuning.code().to_owned());
    let params = RwSignal::new("7".to_owned());
    let precision = RwSignal::new(Precision::Bf16.code().to_owned());
    let dataset = RwSignal::new("100".to_owned());
    let nodes = RwSignal::new(String::new());
    let applied = RwSignal::new(None::<String>);
    let advice = Action::new(|input: &WorkloadInput| advise_workload(input.clone()));
    // The description, with the booking form's shape to check when it names a quantity.
    let request = move || {
        // Text that is not a number is sent as a value the advisor refuses by name (JSON has no NaN).
        let number = |s: RwSignal<String>, bad: f64| s.get_untracked().trim().parse::<f64>().unwrap_or(bad);
        let chosen = offering.get_untracked().and_then(|o| {
            let quantity =
                form.quantity.get_untracked().trim().parse::<i64>().ok().filter(|q| (1..=4096).contains(q))?;
            Some(ChosenShape {
                offering: o.id,
                quantity,
                placement: Some(form.placement.get_untracked()).filter(|p| !p.is_empty()),
                storage_tb: form.storage_tb.get_untracked().trim().parse().ok(),
            })
        });
        WorkloadInput {
            workload: workload.get_untracked(),
            params_billion: number(params, 0.0),
            precision: precision.get_untracked(),
            dataset_gb: if dataset.get_untracked().trim().is_empty() { 0.0 } else { number(dataset, -1.0) },
            nodes: {
                let n = nodes.get_untracked();
                // A value that is not a whole number is sent as 0, which the advisor refuses by name.
                (!n.trim().is_empty()).then(|| n.trim().parse().unwrap_or(0))
            },
            chosen,
        }
    };
    let ask = move || {
        applied.set(None);
        advice.dispatch(request());
    };
    let apply = move |answer: &Advice| {
        let Some(shape) = answer.recommendation.clone() else { return };
        asked.set(Some(shape.offering.clone()));
        form.quantity.set(shape.quantity.to_string());
        form.orchestrator.set(shape.orchestrator.map(|o| o.code().to_owned()).unwrap_or_default());
        form.placement.set(shape.placement.map(|p| p.code().to_owned()).unwrap_or_default());
        form.storage_tb.set(shape.storage_tb.map(|t| t.to_string()).unwrap_or_default());
        // Choices of the previous offering may not be sold by this one: back to its defaults.
        form.cuda_driver.set(String::new());
        form.host_memory_gb.set(String::new());
        form.workload.set(workload.get_untracked());
        applied.set(Some(format!("Applied: {} × {} in the booking form.", shape.quantity, shape.offering_name)));
        // The form's shape changed: ask again so its warnings are the new shape's.
        advice.dispatch(request());
    };
    let number_input = move |label: &'static str, signal: RwSignal<String>, testid: &'static str, min: &'static str| {
        view! {
            <label class="block">
                {label}
                <input
                    type="number"
                    min=min
                    step="any"
                    class=INPUT
                    data-testid=testid
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    let select =
        move |label: &'static str, signal: RwSignal<String>, testid: &'static str, choices: Vec<(String, String)>| {
            view! {
                <label class="block">
                    {label}
                    <select
                        class=INPUT
                        data-testid=testid
                        prop:value=move || signal.get()
                        on:change=move |ev| signal.set(event_target_value(&ev))
                    >
                        {choices
                            .into_iter()
                            .map(|(value, text)| {
                                let selected = value == signal.get_untracked();
                                view! {
                                    <option value=value selected=selected>
                                        {text}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
            }
        };
    let kinds: Vec<(String, String)> =
        Workload::ALL.iter().map(|w| (w.code().to_owned(), workload_label(*w).to_owned())).collect();
    let precisions: Vec<(String, String)> =
        Precision::ALL.iter().map(|p| (p.code().to_owned(), p.code().to_owned())).collect();
    view! {
        <details class=format!("{CARD} text-sm") data-testid="advisor-panel">
            <summary class="cursor-pointer font-semibold" data-testid="advisor-toggle">
                "Advisor: what should I book?"
            </summary>
            <form
                class="mt-3 space-y-2"
                aria-label="Describe the job"
                on:submit=move |ev| {
                    ev.prevent_default();
                    ask();
                }
            >
                {select("Workload", workload, "advisor-workload", kinds)}
                <div class="grid grid-cols-2 gap-2">
                    {number_input("Model size (billion parameters)", params, "advisor-params", "0")}
                    {select("Precision", precision, "advisor-precision", precisions)}
                </div>
                <div class="grid grid-cols-2 gap-2">
                    {number_input("Dataset (GB)", dataset, "advisor-dataset", "0")}
                    {number_input("Nodes wanted (training, optional)", nodes, "advisor-nodes", "1")}
                </div>
                <button
                    type="submit"
                    class="w-full rounded-md border border-indigo-600 px-3 py-2 font-medium text-indigo-700 hover:bg-indigo-50 dark:text-indigo-300 dark:hover:bg-indigo-950"
                    data-testid="advisor-submit"
                    disabled=move || advice.pending().get()
                >
                    "Recommend a shape"
                </button>
            </form>
            <div class="mt-3 space-y-2" aria-live="polite" data-testid="advisor-result">
                {move || {
                    advice
                        .value()
                        .get()
                        .map(|result| match result {
                            Err(error) => view! { <ErrorPanel error /> }.into_any(),
                            Ok(answer) => {
                                let answer = StoredValue::new(answer);
                                view! { <AdviceView answer apply /> }.into_any()
                            }
                        })
                }}
                {move || {
                    applied
                        .get()
                        .map(|text| {
                            view! {
                                <p
                                    role="status"
                                    class="text-emerald-700 dark:text-emerald-300"
                                    data-testid="advisor-applied"
                                >
                                    {text}
                                </p>
                            }
                        })
                }}
            </div>
        </details>
    }
}

/// A list of reasons or warnings, each with its stable kind for tests and programs.
pub(super) fn notes_view(
    notes: Vec<Note>,
    testid: &'static str,
    item: &'static str,
    tone: &'static str,
) -> impl IntoView {
    (!notes.is_empty()).then(|| {
        view! {
            <ul class=format!("list-disc space-y-1 pl-5 {tone}") data-testid=testid>
                {notes
                    .into_iter()
                    .map(|n| {
                        view! {
                            <li data-testid=item data-kind=n.kind>
                                {n.message}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
    })
}

#[component]
pub(super) fn AdviceView(
    answer: StoredValue<Advice>,
    apply: impl Fn(&Advice) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let a = answer.get_value();
    let summary = a.recommendation.as_ref().map(|s| {
        let mut parts = vec![format!("{} × {}", s.quantity, s.offering_name)];
        if s.compact && s.quantity > 1 {
            parts.push("compact placement".to_owned());
        }
        if let Some(o) = s.orchestrator {
            parts.push(o.code().to_owned());
        }
        if let Some(tb) = s.storage_tb {
            parts.push(format!("{tb} TB storage"));
        }
        view! {
            <p
                class="font-medium"
                data-testid="advisor-recommendation"
                data-offering=s.offering.clone()
                data-quantity=s.quantity
            >
                {format!("Recommended: {}.", parts.join(", "))}
            </p>
        }
    });
    let has_shape = a.recommendation.is_some();
    view! {
        <p class="text-slate-600 dark:text-slate-400" data-testid="advisor-footprint">
            {format!("Needs about {:.1} GB of GPU memory and {:.0} GB of storage.", a.footprint_gb, a.storage_gb)}
        </p>
        {summary}
        {notes_view(a.warnings, "advisor-warnings", "advisor-warning", "text-amber-700 dark:text-amber-300")}
        {notes_view(a.reasons, "advisor-reasons", "advisor-reason", "text-slate-700 dark:text-slate-300")}
        {(!a.chosen_warnings.is_empty())
            .then(|| {
                view! { <p class="font-medium text-rose-700 dark:text-rose-300">"The booking form's shape:"</p> }
            })}
        {notes_view(
            a.chosen_warnings,
            "advisor-chosen-warnings",
            "advisor-chosen-warning",
            "text-rose-700 dark:text-rose-300",
        )}
        {has_shape
            .then(|| {
                view! {
                    <button
                        type="button"
                        class="w-full rounded-md bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-500"
                        data-testid="advisor-apply"
                        on:click=move |_| answer.with_value(|a| apply(a))
                    >
                        "Apply to the booking form"
                    </button>
                }
            })}
    }
}
