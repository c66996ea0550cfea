// Suite `store` (tests/conformance/store.json), as bindings/tests/store_conformance.rs runs it:
// a store (in memory or a file, with a durability name), a gate on it, and steps that
// authorize, resolve a deferred request through the store (this handle or a second connection
// on the file), wait for it and resume it with the recorded decision -> each step's result or
// error kind, and the audit rows.
import Foundation
import TurnGate
import XCTest

/// The error's variant name and message, as the vectors name them.
func storeErrorKind(_ e: Error) -> (String, String)? {
    switch e {
    case let TurnGateError.Approval(message): return ("Approval", message)
    case let TurnGateError.InvalidInput(message): return ("InvalidInput", message)
    case let TurnGateError.Store(message): return ("Store", message)
    default: return nil
    }
}

func storeErrorMismatch(_ want: JSON, _ e: Error) -> String? {
    guard let (kind, message) = storeErrorKind(e), kind == want["kind"]?.string else {
        return "expected \(want.text), got \(e)"
    }
    for part in want["includes"]?.array ?? [] where !message.contains(part.string ?? "") {
        return "the error does not say \(part.text): \(message)"
    }
    return nil
}

/// An authorization as the vectors compare it (the facade's JSON field names).
func authorizationJSON(_ a: Authorization) -> JSON {
    switch a {
    case let .allowed(_, target, _, _, cached, _):
        return .object(["outcome": .string("allowed"), "target": .string(target), "cached_approval": .bool(cached)])
    case .denied:
        return .object(["outcome": .string("denied")])
    case let .deferred(request, _, _):
        return .object(["outcome": .string("deferred"), "request": (try? JSON.parse(request)) ?? .null])
    }
}

final class StoreConformanceTests: XCTestCase {
    func runVector(_ v: JSON, _ label: String) async throws -> [String] {
        var failures: [String] = []
        let fm = FileManager.default
        let ws = fm.temporaryDirectory.appendingPathComponent("turngate-store-\(UUID().uuidString)")
        let state = fm.temporaryDirectory.appendingPathComponent("turngate-store-state-\(UUID().uuidString)")
        try fm.createDirectory(at: ws, withIntermediateDirectories: true)
        try fm.createDirectory(at: state, withIntermediateDirectories: true)
        defer {
            try? fm.removeItem(at: ws)
            try? fm.removeItem(at: state)
        }
        if case let .object(files)? = v["files"] {
            for (rel, content) in files {
                try Data((content.string ?? "").utf8).write(to: ws.appendingPathComponent(rel))
            }
        }
        let root = ws.resolvingSymlinksInPath()
        let name = v["store"]?["path"]?.string ?? ""
        let path = name == ":memory:" ? name : state.appendingPathComponent(name).path
        let store: Store
        do {
            store = try Store.open(path: path, durability: v["store"]?["durability"]?.string)
        } catch {
            guard let want = v["expect_open_error"] else { return ["\(label): open failed: \(error)"] }
            if let bad = storeErrorMismatch(want, error) { failures.append("\(label): \(bad)") }
            if let file = v["expect_no_file"]?.string, fm.fileExists(atPath: state.appendingPathComponent(file).path) {
                failures.append("\(label): \(file) was created")
            }
            return failures
        }
        if let want = v["expect_open_error"] { return ["\(label): opened, expected \(want.text)"] }
        let context = JSON.object([
            "workspace_root": .string(root.path),
            "execution_backend": .string("native"),
            "platform": .object([
                "os": .string("linux"), "landlock_abi": .number("7"), "seccomp": .bool(true),
                "user_namespaces": .bool(true), "seatbelt": .bool(false), "restricted_token": .bool(false),
            ]),
        ])
        let selection = v["selection"].flatMap { $0.isNull ? nil : $0.text }
        let snapshotText = try resolveSnapshot(selection: selection, context: context.text, cap: nil)
        let approver = try GateApprover.builtin(name: v["approver"]?.string ?? "")
        var gates: [String: Gate] = [:]
        for turn in ["turn-1", "turn-2"] {
            gates[turn] = try Gate(turnId: turn, snapshot: snapshotText, store: store, approver: approver, broker: nil)
        }
        var results: [JSON] = []
        func requestId(_ step: JSON) -> String {
            if let i = step["request_of"]?.int {
                return results[i]["request"]?["id"]?.string ?? "no-such-request"
            }
            return step["request_id"]?.string ?? ""
        }
        for (i, step) in (v["steps"]?.array ?? []).enumerated() {
            let gate = gates[step["turn"]?.string ?? "turn-1"]!
            let got: JSON
            do {
                switch step["op"]?.string ?? "" {
                case "authorize":
                    got = authorizationJSON(try await gate.authorize(
                        invocation: Invocation(step["kind"]?.string ?? "", step["target"]?.string ?? "")))
                case "resolve":
                    let via = step["via"]?.string == "second_connection" ? try Store.open(path: path) : store
                    got = try JSON.parse(try via.resolve(
                        requestId: requestId(step), resolution: step["resolution"]?.string ?? "",
                        reason: step["reason"]?.string ?? ""))
                case "wait":
                    let timeout = UInt64(step["timeout_ms"]?.int ?? 5000)
                    let approval = try JSON.parse(try await gate.waitResolved(requestId: requestId(step), timeoutMs: timeout))
                    got = .object(["resolution": approval["resolution"]?["resolution"] ?? .null])
                case "resume":
                    got = authorizationJSON(try gate.resume(requestId: requestId(step), decision: nil))
                case "replay_fresh_memory":
                    got = try JSON.parse(try Store.memory().replay(turnId: "turn-1"))
                case let op:
                    throw VectorFailure("unknown op \(op)")
                }
            } catch let e as VectorFailure {
                throw e
            } catch {
                if let want = step["expect_error"] {
                    if let bad = storeErrorMismatch(want, error) { failures.append("\(label) step \(i): \(bad)") }
                } else {
                    failures.append("\(label) step \(i): \(error)")
                    return failures
                }
                results.append(.null)
                continue
            }
            if let want = step["expect_error"] {
                failures.append("\(label) step \(i): expected \(want.text), got \(got.text)")
            }
            if case let .object(expect)? = step["expect"] {
                for (key, want) in expect {
                    switch key {
                    case "rows":
                        if (got.array?.count ?? -1) != want.int { failures.append("\(label) step \(i): rows \(got.text)") }
                    case "target_rel":
                        let target = root.appendingPathComponent(want.string ?? "").path
                        if got["target"]?.string != target { failures.append("\(label) step \(i): target \(got.text)") }
                    default:
                        if (got[key] ?? .null) != want {
                            failures.append("\(label) step \(i): \(key): expected \(want.text), got \(got.text)")
                        }
                    }
                }
            }
            results.append(got)
        }
        if let want = v["expect_audit"] {
            let kinds = JSON.array(try JSON.parse(store.replay(turnId: "turn-1")).array?.map { $0["kind"] ?? .null } ?? [])
            if kinds != want { failures.append("\(label): audit rows\n  expected \(want.text)\n  got      \(kinds.text)") }
        }
        return failures
    }

    func testStoreSuite() async throws {
        var count = 0
        for file in try vectorFiles() where file.suite == "store" {
            for (i, v) in (file.doc["vectors"]?.array ?? []).enumerated() {
                count += 1
                let label = "\(file.name)[\(i)] \(v["why"]?.string ?? "")"
                do {
                    for f in try await runVector(v, label) { XCTFail(f) }
                } catch {
                    XCTFail("\(label): \(error)")
                }
            }
        }
        XCTAssertGreaterThanOrEqual(count, 10, "the store suite lost vectors")
        print("conformance store: \(count) vectors")
    }
}
