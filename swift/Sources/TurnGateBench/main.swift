// The per-call cost of `check`/`explain` from Swift through UniFFI, against a Swift no-op call
// with the same arguments in the same run (docs/performance.md: ratios against a same-run baseline).
// Run by scripts/test-swift and bench/swift_check (which bench/run reads: the
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

// A no-op the optimizer cannot fold away, with the same two string arguments: the Swift
// baseline of the same run (as the Python and Node scripts take theirs).
@inline(never)
func noop(_ kind: String, _ target: String) -> Int { kind.utf8.count &+ target.utf8.count }

let policy = try Policy.tiered()
let n = 200_000
let cases: [(String, String)] = [("file_read", "src/main.rs"), ("file_read", "config/.env"), ("network", "api.example.com:443")]
var sink = 0

let floor = nsPerCall(iterations: n) { sink &+= noop("file_read", "src/main.rs") }
var rows: [(String, Double)] = []
for (kind, target) in cases {
    rows.append(("check \(kind) \(target)", try nsPerCall(iterations: n) {
        if try policy.check(kind, target) == .deny { sink += 1 }
    }))
}
rows.append(("explain file_read config/.env", try nsPerCall(iterations: n / 4) {
    sink += try policy.explain("file_read", "config/.env").layer.count
}))
let batch = (0..<100).map { Action(kind: "file_read", target: $0 % 2 == 0 ? "src/main.rs" : "config/.env", tool: nil) }
let perBatch = try nsPerCall(iterations: 2_000) { sink += try policy.checkBatch(actions: batch).count }
rows.append(("check_batch of 100, per action", perBatch / 100))

print("check per call, tiered policy, median of 7 rounds of \(n) calls")
print("\(pad("case", 50)) \(pad("ns/call", 9)) x no-op")
print("\(pad("swift no-op function call (baseline)", 50)) \(String(format: "%9.0f %8.2f", floor, 1.0))")
for (name, ns) in rows {
    print("\(pad(name, 50)) \(String(format: "%9.0f %8.2f", ns, ns / floor))")
}
if sink < 0 { print("") }
