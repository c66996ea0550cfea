//! Print what this machine offers a sandbox backend, as JSON.

fn main() {
    let caps = turngate::probe::probe_platform();
    match serde_json::to_string_pretty(&caps) {
        Ok(json) => println!("{json}"),
        Err(e) => eprintln!("cannot serialize the probe: {e}"),
    }
}
