//! The wasm entry point: hydrates the server-rendered page into the live Leptos app.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(tenantry_app::App);
}
