// The per-call cost of `check` from Swift through UniFFI, against the native Rust loop of the
// same call measured inside the library in the same run (DESIGN.md §9: ratios against a same-run
// baseline). Run by scripts/test-swift and bench/swift_check (which bench/run reads: the second
// table is in its `case  ns/call  x no-op` form).
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

func pad(_ s: String, _ n: Int) -> String { s.padding(toLength: max(n, s.count), withPad: " ", startingAt: 0) }

let policy = try Policy.tiered()
let n = 200_000
let cases: [(String, String)] = [("file_read", "src/main.rs"), ("file_read", "config/.env"), ("network", "api.example.com:443")]
var sink = 0

print("check per call, tiered default policy, median of 7 rounds of \(n) calls")
print("\(pad("case", 40)) \(pad("rust-native ns", 15)) \(pad("swift ns", 9)) swift/rust")
var swiftRows: [(String, Double)] = []
for (kind, target) in cases {
    let native = try benchNativeCheckNs(policy: policy, kind: kind, target: target, iterations: UInt64(n), rounds: 7)
    let swift = try nsPerCall(iterations: n) {
        if try policy.check(kind: kind, target: target, tool: nil) == .deny { sink += 1 }
    }
    swiftRows.append(("check \(kind) \(target)", swift))
    let fast = try nsPerCall(iterations: n) {
        if try policy.check(kind, target) == .deny { sink += 1 }
    }
    swiftRows.append(("check (integer fast path) \(kind) \(target)", fast))
    print("\(pad("check \(kind) \(target)", 40)) \(String(format: "%15.1f %9.1f %9.1fx", native, swift, swift / native))")
    print("\(pad("  same, integer fast path", 40)) \(String(format: "%15.1f %9.1f %9.1fx", native, fast, fast / native))")
}

var total: UInt64 = 0
let floor = nsPerCall(iterations: n) { total &+= benchNoop(kind: "file_read", target: "src/main.rs") }
let explainNs = try nsPerCall(iterations: n / 4) { sink += try policy.explain("file_read", "config/.env").layer.count }
let explainRecordNs = try nsPerCall(iterations: n / 4) { sink += try policy.explain(kind: "file_read", target: "config/.env", tool: nil).layer.count }
let batch = (0..<100).map { Action(kind: "file_read", target: $0 % 2 == 0 ? "src/main.rs" : "config/.env", tool: nil) }
let perBatch = try nsPerCall(iterations: 2_000) { sink += try policy.checkBatch(actions: batch).count }

print("")
print("\(pad("case", 50)) \(pad("ns/call", 9)) x no-op")
print("\(pad("no-op call (two strings)", 50)) \(String(format: "%9.0f %8.2f", floor, 1.0))")
for (name, ns) in swiftRows {
    print("\(pad(name, 50)) \(String(format: "%9.0f %8.2f", ns, ns / floor))")
}
print("\(pad("explain file_read config/.env", 50)) \(String(format: "%9.0f %8.2f", explainNs, explainNs / floor))")
print("\(pad("explain, the generated record call, file_read config/.env", 50)) \(String(format: "%9.0f %8.2f", explainRecordNs, explainRecordNs / floor))")
print("\(pad("check_batch of 100, per action", 50)) \(String(format: "%9.0f %8.2f", perBatch / 100, perBatch / 100 / floor))")
if sink < 0 || total == 0 { print("") }
