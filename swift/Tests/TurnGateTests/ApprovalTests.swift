// The gate from Swift: an ask goes to a Swift `async` approver; allow_for_turn through the
// broker is cached for the second call; a never-answering approver leaves its run pending while
// other turns are decided; a throwing approver is a denial carrying the reason.
import Foundation
import TurnGate
import XCTest

final class ApprovalTests: XCTestCase {
    var dir: URL!
    var workspace: String { dir.appendingPathComponent("ws").path }

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("turngate-swift-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: dir.appendingPathComponent("ws").path, withIntermediateDirectories: true)
        // Canonical path (the checkers compare canonical paths; /tmp may be a symlink).
        dir = dir.resolvingSymlinksInPath()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func snapshot(mode: String = "supervised") throws -> String {
        let context = JSON.object([
            "workspace_root": .string(workspace),
            "execution_backend": .string("native"),
            "platform": try JSON.parse(probePlatform()),
        ])
        return try resolveSnapshot(selection: "{\"mode\": \"\(mode)\"}", context: context.text, cap: nil)
    }

    func store() throws -> Store {
        try Store.open(path: dir.appendingPathComponent("audit.db").path)
    }

    func eventKinds(_ store: Store, _ turn: String) throws -> [String] {
        try JSON.parse(store.replay(turnId: turn)).array?.compactMap { $0["kind"]?.string } ?? []
    }

    func testAnAskGoesToASwiftAsyncApproverAndIsAllowed() async throws {
        let seen = Seen()
        let store = try store()
        let approver = GateApprover.swift { ask in
            await seen.add(ask)
            try await Task.sleep(nanoseconds: 1_000_000)
            return .approve
        }
        let gate = try Gate(turnId: "t1", snapshot: try snapshot(), store: store, approver: approver, broker: nil)
        let target = workspace + "/notes.txt"
        let auth = try await gate.authorize(invocation: Invocation("file_write", target, tool: "write_file"))
        guard case let .allowed(_, allowedTarget, _, verdict, cached, _) = auth else { return XCTFail("expected allowed, got \(auth)") }
        XCTAssertEqual(allowedTarget, target)
        XCTAssertEqual(verdict.effect, .ask)
        XCTAssertFalse(cached)
        let asks = await seen.asks
        XCTAssertEqual(asks.count, 1)
        let request = try JSON.parse(try XCTUnwrap(asks.first?.request))
        XCTAssertEqual(request["turn_id"]?.string, "t1")
        XCTAssertEqual(asks.first?.action, Action(kind: "file_write", target: target, tool: "write_file"))
        XCTAssertEqual(request["scope_hash"]?.string?.count, 64)
        XCTAssertEqual(asks.first?.verdict.effect, .ask)
        let kinds = try eventKinds(store, "t1")
        XCTAssertTrue(kinds.contains("approval_requested") && kinds.contains("approval_resolved"), "\(kinds)")

        // A read the policy allows never reaches the approver.
        XCTAssertTrue(FileManager.default.createFile(atPath: workspace + "/a.txt", contents: Data("x".utf8)))
        guard case .allowed = try await gate.authorize(invocation: Invocation("file_read", workspace + "/a.txt")) else {
            return XCTFail("an allowed read was not allowed")
        }
        let count = await seen.asks.count
        XCTAssertEqual(count, 1, "an allowed read reached the approver")
    }

    func testAMemoryStoreWaitsForARecordedAnswerAndResumesWithItOnce() async throws {
        XCTAssertThrowsError(try Store.open(path: dir.appendingPathComponent("x.db").path, durability: "fsync"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("x.db").path))
        _ = try Store.open(path: dir.appendingPathComponent("power.db").path, durability: "power")
        let store = try Store.memory()
        let gate = try Gate(turnId: "w", snapshot: try snapshot(), store: store, approver: try .builtin(name: "defer_all"), broker: nil)
        let auth = try await gate.authorize(invocation: Invocation("file_write", workspace + "/n.txt"))
        guard case let .deferred(request, _, _) = auth else { return XCTFail("expected deferred, got \(auth)") }
        let id = try XCTUnwrap(try JSON.parse(request)["id"]?.string)
        let pending = try JSON.parse(try await store.waitResolved(requestId: id, timeoutMs: 10))
        XCTAssertNil(pending["resolution"]?["resolution"]?.string, pending.text)
        XCTAssertThrowsError(try gate.resume(requestId: id, decision: nil), "a pending request resumed")
        let recorded = try JSON.parse(try store.resolve(requestId: id, resolution: "allow_once", reason: "person"))
        XCTAssertEqual(recorded["applied"], .bool(true), recorded.text)
        let resolved = try JSON.parse(try await gate.waitResolved(requestId: id, timeoutMs: nil))
        XCTAssertEqual(resolved["resolution"]?["resolution"]?.string, "allow_once", resolved.text)
        guard case .allowed = try gate.resume(requestId: id, decision: nil) else { return XCTFail("the recorded allow was not allowed") }
        XCTAssertThrowsError(try gate.resume(requestId: id, decision: nil), "a spent allow_once resumed twice")
    }

    func testAThrowingApproverIsADenialWithTheReason() async throws {
        struct ReviewerOut: Error, CustomStringConvertible {
            var description: String { "the reviewer is out" }
        }
        let gate = try Gate(
            turnId: "t1", snapshot: try snapshot(), store: try store(),
            approver: .swift { _ in throw ReviewerOut() }, broker: nil)
        let auth = try await gate.authorize(invocation: Invocation("file_write", workspace + "/x"))
        guard case let .denied(denial) = auth else { return XCTFail("expected denied, got \(auth)") }
        XCTAssertTrue(denial.reason.contains("the reviewer is out"), denial.reason)
        XCTAssertTrue(denial.toolResult.contains("the reviewer is out"), denial.toolResult)

        // A Swift `deny` decision carries its reason too.
        let gate2 = try Gate(
            turnId: "t2", snapshot: try snapshot(), store: try store(),
            approver: .swift { _ in .deny(reason: "not today") }, broker: nil)
        guard case let .denied(d2) = try await gate2.authorize(invocation: Invocation("file_write", workspace + "/y")) else {
            return XCTFail("expected denied")
        }
        XCTAssertEqual(d2.reason, "not today")
    }

    func testAnApprovalCannotCrossADeny() async throws {
        var snap = try JSON.parse(try snapshot())
        guard case var .object(root) = snap, case var .object(profile)? = root["permission_profile"],
            let effective = profile["effective_policy"]
        else { return XCTFail("snapshot shape") }
        let locked = try Policy.fromJson(text: effective.text, origin: nil)
            .withRule(kind: "file_write", effect: .deny, pattern: workspace + "/locked/**", tool: nil, layer: nil)
        profile["effective_policy"] = try JSON.parse(locked.toJson())
        root["permission_profile"] = .object(profile)
        snap = .object(root)
        let gate = try Gate(turnId: "t1", snapshot: snap.text, store: try store(), approver: try .builtin(name: "approve_all"), broker: nil)
        guard case let .denied(d) = try await gate.authorize(invocation: Invocation("file_write", workspace + "/locked/a")) else {
            return XCTFail("an approval crossed a deny")
        }
        // Denied before the approver (the deny rule matched) or at the re-check after it.
        XCTAssertTrue(d.verdict?.effect == .deny || d.reason.contains("an approval cannot override a deny"), d.reason)
    }

    func testANeverAnsweringApproverLeavesTheRunPendingWithoutBlockingOtherTurns() async throws {
        let store = try store()
        let started = Seen()
        let stuck = try Gate(
            turnId: "stuck", snapshot: try snapshot(), store: store,
            approver: .swift { ask in
                await started.add(ask)
                // Never answers (until the test cancels the call).
                while true { try await Task.sleep(nanoseconds: 10_000_000) }
            }, broker: nil)
        let other = try Gate(turnId: "other", snapshot: try snapshot(), store: store, approver: try .builtin(name: "approve_all"), broker: nil)

        let stuckTarget = workspace + "/a"
        let pending = Task { try await stuck.authorize(invocation: Invocation("file_write", stuckTarget)) }
        for _ in 0..<200 where await started.asks.isEmpty { try await Task.sleep(nanoseconds: 5_000_000) }
        let asked = await started.asks.count
        XCTAssertEqual(asked, 1, "the silent approver was never asked")

        // Another turn is decided meanwhile, promptly.
        let t0 = Date()
        guard case .allowed = try await other.authorize(invocation: Invocation("file_write", workspace + "/b")) else {
            return XCTFail("the other turn was not allowed")
        }
        XCTAssertLessThan(Date().timeIntervalSince(t0), 5)
        try await Task.sleep(nanoseconds: 50_000_000)
        let kinds = try eventKinds(store, "stuck")
        XCTAssertTrue(kinds.contains("approval_requested"), "\(kinds)")
        XCTAssertFalse(kinds.contains("approval_resolved"), "the silent approver's request was resolved: \(kinds)")
        pending.cancel()
    }

    func testAllowForTurnThroughTheBrokerIsCachedForTheSecondCall() async throws {
        let store = try store()
        let broker = Broker(policy: try Policy.mode("supervised"))
        let gate = try Gate(
            turnId: "t1", snapshot: try snapshot(), store: store,
            approver: .broker(broker: broker, timeoutMs: nil), broker: broker)
        let notes = workspace + "/notes.txt"
        let subscription = broker.subscribe()

        // The "UI": answers the first request with allow_for_turn.
        let ui = Task { () throws -> [JSON] in
            var seen: [JSON] = []
            for try await text in subscription.notifications {
                let n = try JSON.parse(text)
                seen.append(n)
                if n["method"]?.string == "turn/permission/request/requested", let id = n["params"]?["id"]?.string {
                    _ = try broker.respond(id: id, resolution: "allow_for_turn")
                }
                if n["method"]?.string == "turn/permission/request/resolved" { return seen }
            }
            return seen
        }
        let first = try await gate.authorize(invocation: Invocation("file_write", notes, tool: "write_file"))
        let seen = try await ui.value
        let second = try await gate.authorize(invocation: Invocation("file_write", notes, tool: "write_file"))
        subscription.cancel()

        guard case let .allowed(_, _, _, _, firstCached, _) = first else { return XCTFail("first: \(first)") }
        guard case let .allowed(_, _, _, _, secondCached, _) = second else { return XCTFail("second: \(second)") }
        XCTAssertFalse(firstCached)
        XCTAssertTrue(secondCached, "the second call was not answered by the allow_for_turn grant")
        XCTAssertEqual(seen.compactMap { $0["method"]?.string },
                       ["turn/permission/request/requested", "turn/permission/request/resolved"])
        XCTAssertEqual(seen.last?["params"]?["resolution"]?.string, "allow_for_turn")
        XCTAssertEqual(try JSON.parse(broker.pendingRequests()), .array([]))
        let decisions = try JSON.parse(store.replay(turnId: "t1")).array?.compactMap { $0["decision"]?.string } ?? []
        XCTAssertTrue(decisions.contains("allow_for_turn"), "\(decisions)")
        // The grant does not widen to an unrelated scope.
        let other = try gate.evaluate(invocation: Invocation("file_write", workspace + "/other.txt", tool: "write_file"))
        XCTAssertEqual(other.verdict.effect, .ask)
    }

    func testErrorsNameTheBadInput() throws {
        XCTAssertThrowsError(try Policy.tiered().check("file_reed", "x")) { e in
            guard case let TurnGateError.Policy(message, _, _, _) = e else { return XCTFail("\(e)") }
            XCTAssertTrue(message.contains("file_reed"), message)
        }
        let broker = Broker(policy: try Policy.mode("supervised"))
        XCTAssertThrowsError(try broker.respond(id: "apr_missing", resolution: "allow_once")) { e in
            guard case let TurnGateError.Approval(message) = e else { return XCTFail("\(e)") }
            XCTAssertTrue(message.contains("apr_missing"), message)
        }
        XCTAssertThrowsError(try broker.respond(id: "apr_missing", resolution: "maybe")) { e in
            guard case let TurnGateError.InvalidInput(message) = e else { return XCTFail("\(e)") }
            XCTAssertTrue(message.contains("maybe"), message)
        }
        XCTAssertThrowsError(try Gate(turnId: "t", snapshot: "{}", store: try store(), approver: try .builtin(name: "deny_all"), broker: nil))
        XCTAssertThrowsError(try GateApprover.builtin(name: "maybe_all"))
    }
}

actor Seen {
    var asks: [ApprovalAsk] = []
    func add(_ ask: ApprovalAsk) { asks.append(ask) }
}
