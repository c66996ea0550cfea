// The per-call cost of `check` from Swift through UniFFI, against the native Rust loop measured
// inside the library in the same run (DESIGN.md §9: ratios against a same-run baseline).
// Run: scripts/test-swift (or `swift run -c release TurnGateBench` after it generated the
// bindings).
import Foundation
import TurnGate

func nsPerCall(iterations: Int, rounds: Int = 7, _ body: () throws -> Void) rethrows -> Double {
    var results: [Double] = []
    for _ in 0..<rounds {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations { try body() }
        results.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations))
    }
    return results.sorted()[rounds / 2]
}

let policy = try Policy.tiered()
let n = 200_000
let cases: [(String, String)] = [("file_read", "src/main.rs"), ("file_read", "config/.env")]
print("check cost, median of 7 rounds of \(n) calls (ns/call)")
print("case                              rust-native  swift-uniffi  ratio")
for (kind, target) in cases {
    let native = try benchNativeCheckNs(policy: policy, kind: kind, target: target, iterations: UInt64(n), rounds: 7)
    var sink = 0
    let swift = try nsPerCall(iterations: n) {
        if try policy.check(kind: kind, target: target, tool: nil) == .deny { sink += 1 }
    }
    let label = "\(kind) \(target)".padding(toLength: 32, withPad: " ", startingAt: 0)
    print(String(format: "%@  %11.1f  %12.1f  %5.1fx", label, native, swift, swift / native), sink > 0 ? "" : " ")
}
var total: UInt64 = 0
let floor = nsPerCall(iterations: n) { total &+= benchNoop(kind: "file_read", target: "src/main.rs") }
print(String(format: "FFI floor (no-op call, two strings): %.1f ns/call", floor), total > 0 ? "" : " ")

// The batch API amortizes the crossing: one call for many actions.
let batch = (0..<100).map { Action(kind: "file_read", target: $0 % 2 == 0 ? "src/main.rs" : "config/.env", tool: nil) }
let perBatch = try nsPerCall(iterations: 2_000) { _ = try policy.checkBatch(actions: batch) }
print(String(format: "check_batch of 100 from Swift: %.1f ns/action", perBatch / 100))
