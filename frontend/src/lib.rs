//! The wasm entry point: hydrates the server-rendered page into the live Leptos app.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // `hydrate_lazy` waits for a lazy route's chunk before it hydrates the page that needs it.
    leptos::mount::hydrate_lazy(tenantry_app::App);
}
