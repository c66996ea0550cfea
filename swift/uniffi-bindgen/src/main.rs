//! `uniffi-bindgen`: generates the Swift sources of the `TurnGate` package from the compiled
//! turngate-ffi library (library mode). Run by `swift/generate`.
fn main() {
    uniffi::uniffi_bindgen_main()
}
