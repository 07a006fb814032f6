//! Live updates from server-sent events: a page passes a URL, an event name and a counter, and
//! the counter goes up on every event (in the browser; on the server nothing listens). Pages
//! refetch their resources when the counter moves.

use leptos::prelude::*;

/// Bumps `revision` on every `event` from the event stream at `url` while the page is mounted.
/// An `end` event (the server has nothing more to send) closes the stream instead of letting the
/// browser reconnect.
pub fn follow_events(url: String, event: &'static str, revision: RwSignal<u64>) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        use wasm_bindgen::closure::Closure;
        use wasm_bindgen::JsCast;
        let Ok(source) = web_sys::EventSource::new(&url) else { return };
        let on_event = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| revision.update(|r| *r += 1));
        let _ = source.add_event_listener_with_callback(event, on_event.as_ref().unchecked_ref());
        on_event.forget();
        let closer = source.clone();
        let on_end = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| closer.close());
        let _ = source.add_event_listener_with_callback("end", on_end.as_ref().unchecked_ref());
        on_end.forget();
        let source = send_wrapper::SendWrapper::new(source);
        on_cleanup(move || source.close());
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (url, event, revision);
}

/// Bumps `revision` every `seconds` while the page is mounted (browser only), for views that
/// summarise many objects, like the admin's fleet and queue.
pub fn refresh_every(seconds: u32, revision: RwSignal<u64>) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || revision.update(|r| *r += 1),
            std::time::Duration::from_secs(u64::from(seconds)),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (seconds, revision);
}
