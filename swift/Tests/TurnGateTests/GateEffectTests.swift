// The gate's effects from Swift, end to end: a shell command runs under the kernel sandbox (a
// write inside the workspace lands; a write to a directory the snapshot does not grant is
// refused by the kernel, although this test process can write there itself); a denied command
// never runs; race-free opens hand back `FileHandle`s, and an escape is a denial with no file;
// a forbidden URL resolves to a deny and no address.
import Foundation
import TurnGate
import XCTest

final class GateEffectTests: XCTestCase {
    var dir: URL!
    var workspace: String { dir.appendingPathComponent("ws").path }
    /// A directory beside the workspace that no snapshot root grants.
    var outside: String { dir.appendingPathComponent("outside").path }

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("turngate-effects-\(UUID().uuidString)")
        for sub in ["ws", "outside"] {
            try FileManager.default.createDirectory(
                atPath: dir.appendingPathComponent(sub).path, withIntermediateDirectories: true)
        }
        // Canonical path (the checkers compare canonical paths; /tmp may be a symlink).
        dir = dir.resolvingSymlinksInPath()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    /// A gate over the workspace in `mode`, answering asks with the built-in `approver`.
    func gate(mode: String = "auto_accept_edits", approver: String) throws -> Gate {
        let context = JSON.object([
            "workspace_root": .string(workspace),
            "execution_backend": .string("native"),
            "platform": try JSON.parse(probePlatform()),
        ])
        let snapshot = try resolveSnapshot(selection: "{\"mode\": \"\(mode)\"}", context: context.text, cap: nil)
        return try Gate(
            turnId: "t", snapshot: snapshot,
            store: try Store.open(path: dir.appendingPathComponent("audit.db").path),
            approver: try .builtin(name: approver), broker: nil)
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

    // ---- spawn -------------------------------------------------------------------------------

    func testASandboxedSpawnWritesInsideTheWorkspace() async throws {
        let gate = try gate(approver: "approve_all")
        let inside = workspace + "/inside.txt"
        let result = try await gate.spawn("echo hello > \(inside) && cat \(inside)", cwd: workspace)
        guard case let .ran(process) = result else { return XCTFail("expected ran, got \(result)") }
        XCTAssertEqual(process.exitCode, 0, text(process.stderr))
        XCTAssertTrue(process.succeeded)
        XCTAssertNil(process.signal)
        XCTAssertFalse(process.timedOut)
        XCTAssertEqual(text(process.stdout), "hello\n")
        XCTAssertEqual(try String(contentsOfFile: inside, encoding: .utf8), "hello\n")
        // It ran confined: the sandbox reports what it enforced.
        let report = try JSON.parse(try XCTUnwrap(process.sandbox, "no sandbox report"))
        XCTAssertNotNil(report["backend"]?.string, report.text)
    }

    func testASandboxedSpawnThatEscapesIsRefusedByTheKernel() async throws {
        // This process may write beside the workspace: any refusal below is the sandbox's.
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + "/probe", contents: Data("x".utf8)))
        let gate = try gate(approver: "approve_all")
        let escaped = outside + "/escaped"
        let result = try await gate.spawn("touch \(escaped)", cwd: workspace)
        guard case let .ran(process) = result else { return XCTFail("expected ran, got \(result)") }
        XCTAssertNotEqual(process.exitCode, 0, "the write outside the workspace succeeded")
        XCTAssertFalse(process.succeeded)
        XCTAssertTrue(text(process.stderr).contains("Permission denied"), text(process.stderr))
        XCTAssertFalse(exists(escaped), "the kernel let the write outside the workspace through")

        // A deferred command resumed later, even from a full-access gate, is confined by the
        // snapshot it was requested under; its allow_once runs once.
        let script = workspace + "/w.sh"
        try "touch \(escaped)\necho run >> \(workspace)/after\n".write(toFile: script, atomically: true, encoding: .utf8)
        let deferred = try await self.gate(approver: "defer_all").spawn("sh ./w.sh", cwd: workspace)
        guard case let .deferred(request, _, _) = deferred else { return XCTFail("expected deferred, got \(deferred)") }
        let id = try XCTUnwrap(try JSON.parse(request)["id"]?.string)
        let resumer = try self.gate(mode: "full_access", approver: "deny_all")
        let resumed = try await resumer.resumeSpawn(requestId: id, decision: .approve(modified: nil, remember: []))
        guard case let .ran(approved) = resumed else { return XCTFail("expected ran, got \(resumed)") }
        XCTAssertTrue(text(approved.stderr).contains("Permission denied"), text(approved.stderr))
        XCTAssertFalse(exists(escaped), "the resumed command wrote outside the workspace")
        XCTAssertTrue(exists(workspace + "/after"), "the workspace stays writable")
        do {
            _ = try await resumer.runApproved(requestId: id)
            XCTFail("a spent allow_once ran again")
        } catch {
            XCTAssertTrue("\(error)".contains("already_used"), "\(error)")
        }
        XCTAssertEqual(try String(contentsOfFile: workspace + "/after", encoding: .utf8), "run\n")

        // The control: without a sandbox (full access) the very same command does write there.
        let unconfined = try await self.gate(mode: "full_access", approver: "approve_all")
            .spawn("touch \(escaped)", cwd: workspace)
        XCTAssertEqual(unconfined.process?.exitCode, 0, "\(unconfined)")
        XCTAssertNil(unconfined.process?.sandbox, "full access ran under a sandbox")
        XCTAssertTrue(exists(escaped), "the control command did not write outside the workspace")
    }

    func testADeniedSpawnComesBackDeniedAndNeverRuns() async throws {
        let gate = try gate(approver: "deny_all")
        let never = workspace + "/never"
        let result = try await gate.spawn("touch \(never)", cwd: workspace)
        guard case let .denied(denial) = result else { return XCTFail("expected denied, got \(result)") }
        XCTAssertFalse(denial.reason.isEmpty)
        XCTAssertFalse(denial.toolResult.isEmpty)
        XCTAssertEqual(denial.kind, "shell_command")
        XCTAssertNil(result.process)
        XCTAssertFalse(exists(never), "a denied command ran")
    }

    // ---- race-free opens ---------------------------------------------------------------------

    func testOpenWriteAndOpenReadGoThroughFileHandles() async throws {
        let gate = try gate(approver: "approve_all")
        let out = workspace + "/out.txt"
        let written = try await gate.openWrite(out, tool: "write_file")
        let writer = try XCTUnwrap(written.fileHandle, "denied: \(String(describing: written.denial))")
        try writer.write(contentsOf: Data("hello".utf8))
        try writer.close()
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8), "hello")

        let read = try await gate.openRead(out)
        let reader = try XCTUnwrap(read.fileHandle, "denied: \(String(describing: read.denial))")
        XCTAssertEqual(text(try reader.readToEnd() ?? Data()), "hello")

        // A relative target is the workspace's.
        let relative = try await gate.openRead(Invocation("file_read", "out.txt"))
        XCTAssertEqual(text(try XCTUnwrap(relative.fileHandle).readToEnd() ?? Data()), "hello")
    }

    func testOpensOutsideTheRootsOrThroughAnEscapingSymlinkAreDenied() async throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + "/secret", contents: Data("s".utf8)))
        let gate = try gate(approver: "approve_all")

        let write = try await gate.openWrite(outside + "/new")
        XCTAssertNil(write.fileHandle)
        XCTAssertFalse(try XCTUnwrap(write.denial).reason.isEmpty)
        XCTAssertFalse(exists(outside + "/new"))

        let read = try await gate.openRead(outside + "/secret")
        XCTAssertNil(read.fileHandle)
        XCTAssertNotNil(read.denial)

        // A symlink inside the workspace that leads outside it.
        try FileManager.default.createSymbolicLink(atPath: workspace + "/link", withDestinationPath: outside)
        let viaLink = try await gate.openWrite(workspace + "/link/escaped")
        XCTAssertNotNil(viaLink.denial, "a write through an escaping symlink was opened")
        XCTAssertFalse(exists(outside + "/escaped"))
        let readViaLink = try await gate.openRead(workspace + "/link/secret")
        XCTAssertNotNil(readViaLink.denial, "a read through an escaping symlink was opened")
    }

    // ---- URL resolution ----------------------------------------------------------------------

    func testAForbiddenURLResolvesToADenyAndNoAddress() throws {
        let gate = try gate(approver: "approve_all")
        for (url, host) in [("http://169.254.169.254/", "169.254.169.254"), ("http://127.0.0.1/", "127.0.0.1")] {
            let r = gate.resolveAndCheck(url)
            XCTAssertEqual(r.check.verdict.effect, .deny, "\(url): \(r.check.verdict)")
            XCTAssertEqual(r.addrs, [], url)
            XCTAssertEqual(r.check.host, host)
            XCTAssertEqual(r.check.port, 80)
        }
    }
}
