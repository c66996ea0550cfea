// Suite `gate` (tests/conformance/gate.json), as core/tests/gate_conformance.rs runs it:
// selection + workspace + tool calls with scripted approval answers -> what the gate decided,
// whether it asked, whether a cached allow_for_turn grant answered, and the audit rows. The
// answers come from a Swift "UI" task subscribed to the broker.
import Foundation
import TurnGate
import XCTest

/// The scripted answers, handed out in order to each requested approval.
actor Answers {
    var queue: [String] = []
    var asked = 0
    func push(_ a: String) { queue.append(a) }
    func next() -> String {
        asked += 1
        return queue.isEmpty ? "deny" : queue.removeFirst()
    }
}

final class GateConformanceTests: XCTestCase {
    func makeWorkspace(_ v: JSON) throws -> URL {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("turngate-gate-\(UUID().uuidString)")
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        if case let .object(files)? = v["files"] {
            for (rel, content) in files {
                let url = dir.appendingPathComponent(rel)
                try fm.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data((content.string ?? "").utf8).write(to: url)
            }
        }
        if case let .object(links)? = v["symlinks"] {
            for (rel, target) in links {
                try fm.createSymbolicLink(atPath: dir.appendingPathComponent(rel).path, withDestinationPath: target.string ?? "")
            }
        }
        return dir.resolvingSymlinksInPath()
    }

    func runVector(_ v: JSON, _ label: String) async throws -> [String] {
        var failures: [String] = []
        let ws = try makeWorkspace(v)
        defer { try? FileManager.default.removeItem(at: ws) }
        let context = JSON.object([
            "workspace_root": .string(ws.path),
            "execution_backend": .string("native"),
            "platform": .object([
                "os": .string("linux"), "landlock_abi": .number("7"), "seccomp": .bool(true),
                "user_namespaces": .bool(true), "seatbelt": .bool(false), "restricted_token": .bool(false),
            ]),
        ])
        let selection = v["selection"].flatMap { $0.isNull ? nil : $0.text }
        let snapshotText = try resolveSnapshot(selection: selection, context: context.text, cap: nil)
        guard let effective = try JSON.parse(snapshotText)["permission_profile"]?["effective_policy"] else {
            throw VectorFailure("snapshot without an effective policy")
        }
        let store = try Store.open(path: ws.appendingPathComponent("audit.db").path)
        let broker = Broker(policy: try Policy.fromJson(text: effective.text, origin: nil))
        let gate = try Gate(
            turnId: "turn-1", snapshot: snapshotText, store: store,
            approver: .broker(broker: broker, timeoutMs: nil), broker: broker)

        let answers = Answers()
        let subscription = broker.subscribe()
        let responder = Task {
            for try await text in subscription.notifications {
                let n = try JSON.parse(text)
                if n["method"]?.string == "turn/permission/request/requested", let id = n["params"]?["id"]?.string {
                    _ = try? broker.respond(id: id, resolution: await answers.next())
                }
            }
        }

        for (i, step) in (v["steps"]?.array ?? []).enumerated() {
            guard let kind = step["kind"]?.string, let target = step["target"]?.string, let want = step["expect"] else {
                throw VectorFailure("malformed step \(i)")
            }
            if let answer = step["answer"]?.string { await answers.push(answer) }
            let before = await answers.asked
            let got: [String: JSON]
            var denialText: String? = nil
            switch try await gate.authorize(invocation: Invocation(kind, target, tool: step["tool"]?.string)) {
            case let .allowed(_, _, _, verdict, cached, _):
                got = ["outcome": .string("allowed"), "cached": .bool(cached), "reason": .string(verdict.reason)]
            case let .denied(denial):
                denialText = denial.reason
                got = ["outcome": .string("denied"), "cached": .bool(false),
                       "reason": denial.verdict.map { .string($0.reason) } ?? .null]
            case .deferred:
                got = ["outcome": .string("deferred"), "cached": .bool(false)]
            }
            let asked = await answers.asked > before
            let all = got.merging(["asked": .bool(asked)]) { $1 }
            for key in ["outcome", "cached", "asked", "reason"] {
                if let w = want[key], w != (all[key] ?? .null) {
                    failures.append("\(label) step \(i): \(key): expected \(w.text), got \((all[key] ?? .null).text) (full: \(JSON.object(all).text))")
                }
            }
            if let part = want["denial_includes"]?.string, !(denialText ?? "").contains(part) {
                failures.append("\(label) step \(i): the denial does not say \(part): \(denialText ?? "(not denied)")")
            }
        }
        broker.close()
        _ = await responder.result

        if let want = v["expect_audit"] {
            let rows = JSON.array(try JSON.parse(store.replay(turnId: "turn-1")).array?.map { e in
                JSON.array([e["kind"] ?? .null, e["decision"] ?? .null, e["cached_approval_used"] ?? .bool(false)])
            } ?? [])
            if rows != want {
                failures.append("\(label): audit rows\n  expected \(want.text)\n  got      \(rows.text)")
            }
        }
        return failures
    }

    func testGateSuite() async throws {
        var count = 0
        for file in try vectorFiles() where file.suite == "gate" {
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
        XCTAssertGreaterThan(count, 0, "no vectors for suite gate")
        print("conformance gate: \(count) vectors")
    }
}
