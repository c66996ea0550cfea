// Reviewable writes from Swift: `gate.spawn(_:cwd:review: true)` runs a real child against an
// overlay, the workspace stays untouched, and the store lists, shows, applies and discards the
// change set; every refusal is `TurnGateError.Changes(code, message, paths)`. Where overlayfs
// in a user namespace is unavailable (the Debian root of scripts/swift-env is a chroot, where
// the kernel refuses new user namespaces) the reviewed spawn must be refused with `unavailable`
// and nothing may run; the tests that need a change set are then skipped, saying so, and
// scripts/test-swift runs them again on the host (TURNGATE_REQUIRE_REVIEW=1), where they must
// pass.
import Foundation
import TurnGate
import XCTest

final class ReviewTests: XCTestCase {
    var dir: URL!
    var workspace: String { dir.appendingPathComponent("ws").path }
    let line = "sh -c 'echo new > a.txt; rm b.txt'"

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("turngate-review-\(UUID().uuidString)")
        for sub in ["ws", "state", "other"] {
            try FileManager.default.createDirectory(
                atPath: dir.appendingPathComponent(sub).path, withIntermediateDirectories: true)
        }
        dir = dir.resolvingSymlinksInPath()
        try "b\n".write(toFile: workspace + "/b.txt", atomically: false, encoding: .utf8)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func store(_ sub: String = "state/audit.db") throws -> Store {
        try Store.open(path: dir.appendingPathComponent(sub).path)
    }

    func gate(_ store: Store) throws -> Gate {
        let context = JSON.object([
            "workspace_root": .string(workspace),
            "execution_backend": .string("native"),
            "platform": try JSON.parse(probePlatform()),
        ])
        let snapshot = try resolveSnapshot(
            selection: "{\"mode\": \"auto_accept_edits\"}", context: context.text, cap: nil)
        return try Gate(
            turnId: "t-review", snapshot: snapshot, store: store,
            approver: try .builtin(name: "approve_all"), broker: nil)
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: workspace + "/" + name) }

    func read(_ name: String) throws -> String { try String(contentsOfFile: workspace + "/" + name, encoding: .utf8) }

    /// The change set of a reviewed run of `line`, or a skip where review is unavailable here
    /// (after checking that nothing ran).
    func reviewedRun(_ store: Store) async throws -> ChangeSetSummary {
        let result: SpawnResult
        do {
            result = try await gate(store).spawn(line, cwd: workspace, review: true)
        } catch let TurnGateError.Changes(code, message, _) where code == "unavailable" {
            XCTAssertFalse(exists("a.txt"), "a refused review ran the command")
            XCTAssertEqual(try read("b.txt"), "b\n")
            // scripts/test-swift runs these tests again outside the chroot and requires them.
            if ProcessInfo.processInfo.environment["TURNGATE_REQUIRE_REVIEW"] != nil {
                XCTFail("reviewable writes are unavailable: \(message)")
            }
            throw XCTSkip("reviewable writes are unavailable here: \(message)")
        }
        guard case let .ran(process) = result else { throw XCTSkip("expected ran, got \(result)") }
        XCTAssertEqual(process.exitCode, 0, String(decoding: process.stderr, as: UTF8.self))
        return try XCTUnwrap(process.changeSet, "a reviewed spawn carries its change set")
    }

    func changesCode(_ body: () throws -> Void) -> (String, [String])? {
        do {
            try body()
        } catch let TurnGateError.Changes(code, _, paths) {
            return (code, paths)
        } catch {
            XCTFail("not a Changes error: \(error)")
        }
        return nil
    }

    func testAReviewedSpawnHoldsItsWritesUntilApplied() async throws {
        let store = try store()
        let summary = try await reviewedRun(store)
        XCTAssertFalse(exists("a.txt"))
        XCTAssertEqual(try read("b.txt"), "b\n")
        XCTAssertEqual(summary.added, [workspace + "/a.txt"])
        XCTAssertEqual(summary.deleted, [workspace + "/b.txt"])
        XCTAssertEqual(summary.modified, [])
        XCTAssertEqual(summary.summary, "1 added, 1 deleted")

        let listed = try JSON.parse(try store.changeSets())
        XCTAssertEqual(listed.array?.count, 1)
        let shown = try JSON.parse(try store.changeSet(id: summary.id))
        XCTAssertEqual(shown["changes"]?.array?.map { $0["path"]?.string }, ["a.txt", "b.txt"])

        let applied = try JSON.parse(try store.applyChangeSet(summary.id, by: "person:ana"))
        XCTAssertEqual(applied["status"]?.string, "applied")
        XCTAssertEqual(try read("a.txt"), "new\n")
        XCTAssertFalse(exists("b.txt"))
        XCTAssertEqual(changesCode { _ = try store.applyChangeSet(summary.id) }?.0, "not_pending")
        XCTAssertEqual(changesCode { _ = try store.discardChangeSet(summary.id) }?.0, "not_pending")
    }

    func testADiscardedRunLeavesTheWorkspaceUntouched() async throws {
        let store = try store()
        let summary = try await reviewedRun(store)
        let discarded = try JSON.parse(try store.discardChangeSet(summary.id, by: "person:ana"))
        XCTAssertEqual(discarded["status"]?.string, "discarded")
        XCTAssertFalse(exists("a.txt"))
        XCTAssertEqual(try read("b.txt"), "b\n")
        XCTAssertEqual(changesCode { _ = try store.applyChangeSet(summary.id) }?.0, "not_pending")
        XCTAssertFalse(exists("a.txt"), "apply after discard wrote")
    }

    func testApplyRefusesAConflictAndNamesThePath() async throws {
        let store = try store()
        let summary = try await reviewedRun(store)
        try "edited meanwhile\n".write(toFile: workspace + "/b.txt", atomically: false, encoding: .utf8)
        let refused = changesCode { _ = try store.applyChangeSet(summary.id) }
        XCTAssertEqual(refused?.0, "conflicts")
        XCTAssertEqual(refused?.1, [workspace + "/b.txt"])
        XCTAssertFalse(exists("a.txt"))
        XCTAssertEqual(try read("b.txt"), "edited meanwhile\n")
    }

    func testIdsFromAnotherStoreOrAPathAreRefused() async throws {
        let store = try store()
        let summary = try await reviewedRun(store)
        let other = try self.store("other/audit.db")
        XCTAssertEqual(changesCode { _ = try other.applyChangeSet(summary.id) }?.0, "not_found")
        for bad in ["../state/changes", "../../etc/passwd", "cs-1/../../x", ""] {
            XCTAssertEqual(changesCode { _ = try store.applyChangeSet(bad) }?.0, "bad_id", bad)
            XCTAssertEqual(changesCode { _ = try store.changeSet(id: bad) }?.0, "bad_id", bad)
        }
        XCTAssertFalse(exists("a.txt"))
    }

    func testReviewIsRefusedWhereTheStoreIsTheWorkspace() async throws {
        // The store's directory is the writable root: refused (Run, or Changes where review is
        // unavailable altogether), and nothing runs.
        do {
            _ = try await gate(try store("ws/audit.db")).spawn("touch ran.txt", cwd: workspace, review: true)
            XCTFail("a reviewed spawn with the store in the workspace ran")
        } catch TurnGateError.Run(_), TurnGateError.Changes(_, _, _) {}
        XCTAssertFalse(exists("ran.txt"), "the command ran")
    }
}
