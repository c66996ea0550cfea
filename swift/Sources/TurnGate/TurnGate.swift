// The idiomatic Swift layer over the UniFFI-generated bindings (module TurnGateBindings, which
// this module re-exports). It adds Swift names where UniFFI's are rough, a closure approver,
// notifications as an AsyncSequence, and gated opens as `FileHandle`s (a raw descriptor never
// reaches the caller). It decides nothing: every answer comes from turngate-ffi.
import Foundation
@_exported import TurnGateBindings

extension Policy {
    /// The tiered policy: reads allowed, writes and exec ask, network denied,
    /// secrets denied.
    public static func tiered() throws -> Policy {
        try tiered(testBinary: nil, providerHost: nil)
    }

    /// The compiled policy of a permission mode (`full_access`, `auto_accept_edits`,
    /// `supervised`).
    public static func mode(_ mode: String) throws -> Policy {
        try fromMode(mode: mode)
    }

    /// The effect of an action (the hot path).
    public func check(_ kind: String, _ target: String, tool: String? = nil) throws -> Effect {
        try check(kind: kind, target: target, tool: tool)
    }

    /// The verdict of an action: effect, deciding rule and layer, reason.
    public func explain(_ kind: String, _ target: String, tool: String? = nil) throws -> Verdict {
        try explain(kind: kind, target: target, tool: tool)
    }
}

extension Store {
    /// Apply change set `id` to the workspace, all or nothing: the applied `ChangeSet` JSON.
    /// A refusal throws `TurnGateError.Changes(code, message, paths)` (`conflicts`,
    /// `policy_refused`, `tampered`, `not_pending`, ...); nothing in the workspace changed.
    public func applyChangeSet(_ id: String, confirmAsks: Bool = false, by: String? = nil) throws
        -> String
    {
        try applyChangeSet(id: id, options: ApplyOptions(confirmAsks: confirmAsks, by: by))
    }

    /// Discard change set `id` (the workspace was never touched): the discarded `ChangeSet`
    /// JSON.
    public func discardChangeSet(_ id: String, by: String? = nil) throws -> String {
        try discardChangeSet(id: id, by: by)
    }

    /// Re-decide every recorded decision under `policy` as a candidate (`turngate replay`):
    /// the JSON report `{"decisions", "flips"}` of the decisions that flip. `options` is JSON
    /// `{"turn"?, "since"?, "workspace"?}`.
    public func replay(_ policy: Policy, options: String? = nil) throws -> String {
        try replayPolicy(policy: policy, options: options)
    }
}

extension Effect: CustomStringConvertible {
    /// The wire name: `allow`, `ask` or `deny`.
    public var description: String {
        switch self {
        case .allow: return "allow"
        case .ask: return "ask"
        case .deny: return "deny"
        }
    }
}

extension Decision {
    /// Approve the action as shown.
    public static var approve: Decision { .approve(modified: nil, remember: []) }
}

extension TurnGateError: CustomStringConvertible {
    /// The message, naming what was wrong.
    public var description: String {
        switch self {
        case let .Policy(message, _, _, _), let .Snapshot(_, message), let .Store(message),
            let .SandboxUnavailable(message), let .Approval(message), let .Run(message),
            let .Changes(_, message, _), let .InvalidInput(message):
            return message
        }
    }
}

/// An approver from an `async` closure. A thrown error is a denial carrying its text; a
/// closure that never returns leaves that one run pending.
public final class ClosureApprover: Approver, @unchecked Sendable {
    private let body: @Sendable (ApprovalAsk) async throws -> Decision

    public init(_ body: @escaping @Sendable (ApprovalAsk) async throws -> Decision) {
        self.body = body
    }

    public func decide(ask: ApprovalAsk) async throws -> Decision {
        do {
            return try await body(ask)
        } catch let error as TurnGateError {
            throw error
        } catch {
            // UniFFI passes only the declared error type across; keep the text of any other.
            throw TurnGateError.Approval(message: String(describing: error))
        }
    }
}

extension GateApprover {
    /// A Swift approver from an `async` closure.
    public static func swift(
        _ body: @escaping @Sendable (ApprovalAsk) async throws -> Decision
    ) -> GateApprover {
        foreign(approver: ClosureApprover(body))
    }
}

extension Invocation {
    /// A tool call with only a kind and a target (and optionally a tool name).
    public init(_ kind: String, _ target: String, tool: String? = nil) {
        self.init(kind: kind, target: target, tool: tool)
    }
}

extension Subscription {
    /// The notifications (`{"method", "params"}` JSON text) as an async sequence that ends when
    /// the subscription or the broker does.
    public var notifications: AsyncThrowingStream<String, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    while let next = try await self.next() {
                        continuation.yield(next)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

// ---- gate effects: spawn, race-free opens, URL resolution ------------------------------------

/// What `Gate.openRead(_:)` or `Gate.openWrite(_:)` did.
public enum GatedFile {
    /// Opened race-free beneath its root. The handle owns the descriptor and closes it when it
    /// is released (or on `close()`).
    case opened(FileHandle)
    /// Refused by the policy, the approver, or the race-free open (a symlink leading outside
    /// the roots). Nothing was opened.
    case denied(Denial)

    /// The handle, when the file was opened.
    public var fileHandle: FileHandle? {
        if case let .opened(handle) = self { return handle }
        return nil
    }

    /// The refusal, when the open was denied.
    public var denial: Denial? {
        if case let .denied(denial) = self { return denial }
        return nil
    }
}

extension OpenResult {
    /// Take ownership of the descriptor: an opened file becomes a `FileHandle` that closes it
    /// on release. Call this exactly once per result; the fd is not usable afterwards through
    /// anything else.
    public func adoptingFileHandle() -> GatedFile {
        switch self {
        case let .opened(fd): return .opened(FileHandle(fileDescriptor: fd, closeOnDealloc: true))
        case let .denied(denial): return .denied(denial)
        }
    }
}

extension SpawnResult {
    /// The finished process, when the command ran.
    public var process: ProcessOutcome? {
        if case let .ran(process) = self { return process }
        return nil
    }

    /// The refusal, when the command was denied (nothing ran).
    public var denial: Denial? {
        if case let .denied(denial) = self { return denial }
        return nil
    }
}

extension ProcessOutcome {
    /// True when the process exited with code 0 (not signalled, not timed out).
    public var succeeded: Bool { exitCode == 0 && !timedOut }
}

extension Gate {
    /// Authorize a shell command and, when allowed, run it under the snapshot's sandbox
    /// (`cwd` defaults to the workspace). Throws `SandboxUnavailable` when the snapshot requires
    /// a sandbox this platform cannot provide; nothing runs unconfined. With `review: true` the
    /// command's writes become a change set beside the gate's store (`process.changeSet`), the
    /// workspace untouched until `Store.applyChangeSet`; where that cannot be done it throws
    /// (`Changes`, `Run`), never runs unreviewed.
    public func spawn(
        _ commandLine: String, cwd: String? = nil, tool: String? = nil, review: Bool = false
    ) async throws -> SpawnResult {
        try await spawn(
            invocation: Invocation(
                kind: "shell_command", target: commandLine, tool: tool, cwd: cwd, review: review))
    }

    /// Authorize a read of `invocation.target` and open it race-free beneath its root.
    public func openRead(_ invocation: Invocation) async throws -> GatedFile {
        try await openRead(invocation: invocation).adoptingFileHandle()
    }

    /// Authorize a read of `path` (absolute, or relative to the workspace) and open it
    /// race-free beneath its root.
    public func openRead(_ path: String, tool: String? = nil) async throws -> GatedFile {
        try await openRead(Invocation("file_read", path, tool: tool))
    }

    /// Authorize a write of `invocation.target` and open it race-free beneath its root,
    /// creating or truncating it.
    public func openWrite(_ invocation: Invocation) async throws -> GatedFile {
        try await openWrite(invocation: invocation).adoptingFileHandle()
    }

    /// Authorize a write of `path` (absolute, or relative to the workspace) and open it
    /// race-free beneath its root, creating or truncating it.
    public func openWrite(_ path: String, tool: String? = nil) async throws -> GatedFile {
        try await openWrite(Invocation("file_write", path, tool: tool))
    }

    /// Check a URL and resolve it: connect only to `addrs` (empty unless the verdict allows or
    /// asks). Blocks the calling thread on DNS; call it off the main actor.
    public func resolveAndCheck(_ url: String, tool: String? = nil) -> NetworkResolution {
        resolveAndCheck(url: url, tool: tool)
    }
}
