// Runs the shared conformance vectors (tests/conformance/*.json) through the Swift package,
// the same files the Rust, Python and Node suites run. A vector file whose suite this runner
// does not know fails the run unless it is listed in `notRunHere` with the reason.
import Foundation
import TurnGate
import XCTest

let repoRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
let conformanceDir = repoRoot.appendingPathComponent("tests/conformance")

/// Suites on disk this runner does not run, each with the reason.
let notRunHere: [String: String] = [
    "tools": "the guarded tools (issue 19) are in the facade, Python and Node; the UniFFI layer does not export them yet",
]

struct VectorFile {
    let name: String
    let suite: String
    let doc: JSON
}

func vectorFiles() throws -> [VectorFile] {
    let names = try FileManager.default.contentsOfDirectory(atPath: conformanceDir.path)
        .filter { $0.hasSuffix(".json") }.sorted()
    return try names.map { name in
        let text = try String(contentsOf: conformanceDir.appendingPathComponent(name), encoding: .utf8)
        let doc = try JSON.parse(text)
        return VectorFile(name: name, suite: doc["suite"]?.string ?? "", doc: doc)
    }
}

struct VectorFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func require(_ cond: Bool, _ message: @autoclosure () -> String) throws {
    if !cond { throw VectorFailure(message()) }
}

/// The vector with `{tmp}` replaced by a fresh temporary directory in every string, and every
/// path of its `dirs` created there (a snapshot's roots must exist). Returns the vector and the
/// directory to remove.
func materialize(_ v: JSON) throws -> (JSON, URL) {
    let fm = FileManager.default
    let dir = fm.temporaryDirectory.appendingPathComponent("turngate-vector-\(UUID().uuidString)")
    try fm.createDirectory(at: dir, withIntermediateDirectories: true)
    let base = dir.resolvingSymlinksInPath().path
    let quoted = JSON.quote(base)
    let text = v.text.replacingOccurrences(of: "{tmp}", with: String(quoted.dropFirst().dropLast()))
    let out = try JSON.parse(text)
    for d in out["dirs"]?.array ?? [] {
        guard let path = d.string else { throw VectorFailure("dirs: not a string: \(d.text)") }
        try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    return (out, dir)
}

final class ConformanceTests: XCTestCase {
    /// Runs every vector of every file of `suite`; returns how many ran.
    @discardableResult
    func run(_ suites: [String], _ body: (JSON) throws -> Void) throws -> Int {
        var count = 0
        var files = 0
        for file in try vectorFiles() where suites.contains(file.suite) {
            files += 1
            for (i, v) in (file.doc["vectors"]?.array ?? []).enumerated() {
                count += 1
                do {
                    if file.suite.hasPrefix("snapshot_") {
                        let (vector, dir) = try materialize(v)
                        defer { try? FileManager.default.removeItem(at: dir) }
                        try body(vector)
                    } else {
                        try body(v)
                    }
                } catch {
                    XCTFail("\(file.name)[\(i)] \(v["why"]?.string ?? ""): \(error)")
                }
            }
        }
        XCTAssertGreaterThan(files, 0, "no vector file for suites \(suites)")
        XCTAssertGreaterThan(count, 0, "no vectors for suites \(suites)")
        print("conformance \(suites.joined(separator: ",")): \(count) vectors in \(files) file(s)")
        return count
    }

    // ---- suite policy ----------------------------------------------------------------------

    func builtin(_ name: String) throws -> Policy {
        switch name {
        case "default": return try Policy.tiered()
        case "permissive": return try Policy.permissive()
        default: return try Policy.mode(name)
        }
    }

    func policy(of v: JSON) throws -> Policy {
        if let name = v.string { return try builtin(name) }
        return try Policy.fromJson(text: v.text, origin: nil)
    }

    func build(_ v: JSON) throws -> Policy {
        var p: Policy
        switch (v["builtin"]?.string, v["policy"]) {
        case let (b?, nil): p = try builtin(b)
        case let (b?, pol?): p = try builtin(b).merge(other: try policy(of: pol))
        case let (nil, pol?): p = try policy(of: pol)
        default: throw VectorFailure("neither builtin nor policy")
        }
        for m in v["merge"]?.array ?? [] { p = try p.merge(other: try policy(of: m)) }
        for c in v["contain"]?.array ?? [] { p = try p.contain(cap: try policy(of: c)) }
        return p
    }

    func testPolicySuite() throws {
        try run(["policy"]) { v in
            let p = try build(v)
            guard let a = v["action"], let kind = a["kind"]?.string, let target = a["target"]?.string,
                let expect = v["expect"]
            else { throw VectorFailure("malformed vector") }
            let tool = a["tool"]?.string
            let verdict = try p.explain(kind, target, tool: tool)
            let got = JSON.object([
                "effect": .string(verdict.effect.description),
                "rule": verdict.rule.map { .string($0.pattern) } ?? .null,
                "layer": .string(verdict.layer),
                "reason": .string(verdict.reason),
            ])
            try require(got == expect, "expected \(expect.text), got \(got.text)")
            // `check` is `explain(..).effect`, one at a time and batched.
            try require(try p.check(kind, target, tool: tool) == verdict.effect, "check disagrees with explain")
            let batch = try p.checkBatch(actions: [Action(kind: kind, target: target, tool: tool)])
            try require(batch == [verdict.effect], "check_batch disagrees with explain")
        }
    }

    func testExplainCarriesARuleWithItsToolFilter() throws {
        let json = #"{"layers": [{"name": "odd", "rules": [{"kind": "file_read", "effect": "deny", "pattern": "a\u001fb", "tool": "t*"}, {"kind": "file_read", "effect": "ask", "pattern": "x*", "tool": "t*"}]}]}"#
        let p = try Policy.fromJson(text: json, origin: nil)
        let verdict = try p.explain("file_read", "a\u{1f}b", tool: "tool")
        XCTAssertEqual(verdict.effect, .deny)
        XCTAssertEqual(verdict.rule?.pattern, "a\u{1f}b")
        XCTAssertEqual(verdict.rule?.tool, "t*")
        let asked = try p.explain("file_read", "x", tool: "tool")
        XCTAssertEqual(asked.rule?.tool, "t*")
    }

    // The record reader (swift/uniffi-bindgen replaces the generated readInt/readBytes): long
    // and multi-byte strings, an absent option, and a long sequence lift field for field.
    func testRecordsLiftLongMultiByteFieldsAndLongSequences() throws {
        let layer = "équipe-sécurité-très-longue-文件层"
        let pattern = "dossier/ünïcødé-文件/**/*.geheim"
        let json = #"{"layers": [{"name": "\#(layer)", "rules": [{"kind": "file_read", "effect": "deny", "pattern": "\#(pattern)"}]}]}"#
        let p = try Policy.fromJson(text: json, origin: nil)
        let denied = try p.explain("file_read", "dossier/ünïcødé-文件/a/b.geheim")
        XCTAssertEqual(denied.effect, .deny)
        XCTAssertEqual(denied.layer, layer)
        XCTAssertEqual(denied.reason, "deny_rule")
        XCTAssertEqual(denied.rule, Rule(kind: "file_read", effect: .deny, pattern: pattern, tool: nil))
        let other = try p.explain("file_read", "elsewhere")
        XCTAssertNil(other.rule)
        XCTAssertEqual(other.layer, "defaults")
        let batch = (0..<500).map { i in
            Action(kind: "file_read", target: i % 3 == 0 ? "dossier/ünïcødé-文件/\(i).geheim" : "src/\(i).rs", tool: nil)
        }
        let effects = try p.checkBatch(actions: batch)
        XCTAssertEqual(effects.count, 500)
        for (i, effect) in effects.enumerated() {
            XCTAssertEqual(effect, try p.check(batch[i].kind, batch[i].target), "action \(i)")
        }
        XCTAssertEqual(effects.filter { $0 == .deny }.count, 167)
    }

    // ---- suite changes_serde (as core/tests/conformance_changes.rs) -------------------------

    func testChangesSerdeSuite() throws {
        try run(["changes_serde"]) { v in
            guard let set = v["change_set"] else { throw VectorFailure("malformed vector") }
            do {
                let got = try JSON.parse(try parseChangeSet(json: set.text))
                if let needle = v["expect_error"]?.string {
                    throw VectorFailure("expected an error naming \(needle), got \(got.text)")
                }
                try require(got == set, "expected \(set.text), got \(got.text)")
            } catch let TurnGateError.InvalidInput(message) {
                guard let needle = v["expect_error"]?.string else {
                    throw VectorFailure("unexpected error: \(message)")
                }
                try require(message.contains(needle), "`\(message)` does not name `\(needle)`")
            }
        }
    }

    // ---- suite policy_serde ----------------------------------------------------------------

    func testPolicySerdeSuite() throws {
        try run(["policy_serde"]) { v in
            guard let text = v["text"]?.string, let format = v["format"]?.string else {
                throw VectorFailure("malformed vector")
            }
            let parsed: Policy
            do {
                switch format {
                case "json": parsed = try Policy.fromJson(text: text, origin: nil)
                case "toml": parsed = try Policy.fromToml(text: text, origin: nil)
                default: throw VectorFailure("bad format \(format)")
                }
            } catch let TurnGateError.Policy(message, path, line, column) {
                guard let want = v["expect_error"] else { throw VectorFailure("unexpected error: \(message)") }
                try require(path == want["path"]?.string, "path: expected \(want["path"]?.text ?? "null"), got \(path ?? "nil")")
                try require(line.map { "\($0)" } == want["line"].flatMap { if case let .number(n) = $0 { return n } else { return nil } },
                            "line: expected \(want["line"]?.text ?? "null"), got \(String(describing: line))")
                try require(column.map { "\($0)" } == want["column"].flatMap { if case let .number(n) = $0 { return n } else { return nil } },
                            "column: expected \(want["column"]?.text ?? "null"), got \(String(describing: column))")
                for needle in want["contains"]?.array ?? [] {
                    try require(message.contains(needle.string ?? "\u{0}"), "message \(message) lacks \(needle.text)")
                }
                return
            }
            guard let want = v["expect_policy"] else { throw VectorFailure("expected an error, got \(parsed.toJson())") }
            let got = try JSON.parse(parsed.toJson())
            try require(got == want, "expected \(want.text), got \(got.text)")
            // Round trips through both formats.
            try require(try JSON.parse(Policy.fromJson(text: parsed.toJson(), origin: nil).toJson()) == got, "json round trip")
            try require(try JSON.parse(Policy.fromToml(text: parsed.toToml(), origin: nil).toJson()) == got, "toml round trip")
        }
    }

    // ---- tooling suites (as core/tests/conformance_tooling.rs) -----------------------------

    func buildTooling(_ v: JSON) throws -> Policy {
        var own: Policy? = nil
        if let pol = v["policy"] {
            own = try policy(of: pol)
        } else if let text = v["policy_toml"]?.string {
            own = try Policy.fromToml(text: text, origin: nil)
        }
        var p: Policy
        if let b = v["builtin"]?.string {
            p = try builtin(b)
            if let o = own { p = try p.merge(other: o) }
        } else {
            guard let o = own else { throw VectorFailure("neither builtin nor policy") }
            p = o
        }
        for c in v["contain"]?.array ?? [] { p = try p.contain(cap: try policy(of: c)) }
        return p
    }

    func testPolicyTurnSuite() throws {
        try run(["policy_turn"]) { v in
            guard let a = v["action"], let kind = a["kind"]?.string, let target = a["target"]?.string,
                let history = v["history"], let expect = v["expect"]
            else { throw VectorFailure("malformed vector") }
            let text = try buildTooling(v).explainInTurn(
                kind: kind, target: target, tool: a["tool"]?.string, history: history.text)
            guard case var .object(got) = try JSON.parse(text) else { throw VectorFailure("not an object: \(text)") }
            got["rule"] = got["rule"]?["pattern"] ?? .null
            try require(JSON.object(got) == expect, "expected \(expect.text), got \(JSON.object(got).text)")
        }
    }

    func testPolicyLintSuite() throws {
        try run(["policy_lint"]) { v in
            guard let expect = v["expect"] else { throw VectorFailure("malformed vector") }
            let findings = try JSON.parse(try buildTooling(v).lint()).array ?? []
            let got = JSON.array(findings.map { f in
                JSON.object(["code": f["code"] ?? .null, "path": f["path"] ?? .null])
            })
            try require(got == expect, "expected \(expect.text), got \(got.text)")
        }
    }

    func testReplaySuite() throws {
        try run(["replay"]) { v in
            guard let events = v["events"], let expect = v["expect"] else { throw VectorFailure("malformed vector") }
            let got = try JSON.parse(try buildTooling(v).replayEvents(events: events.text, options: v["options"]?.text))
            try require(got == expect, "expected \(expect.text), got \(got.text)")
        }
    }

    // ---- snapshot suites -------------------------------------------------------------------

    func cap(of v: JSON) throws -> String? {
        if let cap = v["cap"] { return cap.text }
        guard let parent = v["cap_from_parent"], let context = parent["context"], let origin = parent["origin"]?.string
        else { return nil }
        let selection = parent["selection"].flatMap { $0.isNull ? nil : $0.text }
        let snapshot = try resolveSnapshot(selection: selection, context: context.text, cap: nil)
        return try capFromParent(snapshot: snapshot, origin: origin)
    }

    func resolve(_ v: JSON) throws -> String {
        guard let context = v["context"] else { throw VectorFailure("no context") }
        let selection = v["selection"].flatMap { $0.isNull ? nil : $0.text }
        return try resolveSnapshot(selection: selection, context: context.text, cap: try cap(of: v))
    }

    func testSnapshotResolveAndCapSuites() throws {
        try run(["snapshot_resolve", "snapshot_cap"]) { v in
            let needle = v["expect_error"]?.string
            let text: String
            do {
                text = try resolve(v)
            } catch let e as TurnGateError {
                guard let needle else { throw VectorFailure("unexpected error: \(e)") }
                try require(e.description.contains(needle), "error `\(e)` does not name `\(needle)`")
                return
            }
            try require(needle == nil, "expected an error naming \(needle ?? ""), got a snapshot")
            let snapshot = try JSON.parse(text)
            if let expect = v["expect"], let m = subsetMismatch(expect, snapshot, "snapshot") {
                throw VectorFailure(m)
            }
            if let want = v["native_shell"]?.string {
                var got = "allowed"
                do {
                    try ensureNativeShellAllowed(snapshot: text)
                } catch TurnGateError.SandboxUnavailable {
                    got = "sandbox_unavailable"
                } catch let TurnGateError.Snapshot(code, _) {
                    got = code == "provider_native_on_native_shell" ? code : "other_error"
                }
                try require(got == want, "native_shell: expected \(want), got \(got)")
            }
        }
    }

    func testSnapshotPromptSuite() throws {
        try run(["snapshot_prompt"]) { v in
            let snapshot = try JSON.parse(try resolve(v))
            guard let profile = snapshot["permission_profile"] else { throw VectorFailure("no permission_profile") }
            let got = try renderPermissionsSection(profile: profile.text)
            if let expect = v["expect"] {
                try require(got == expect.string, "expected \(expect.text), got \(got ?? "nil")")
            }
            for needle in v["expect_contains"]?.array ?? [] {
                guard let got else { throw VectorFailure("expected a section, got none") }
                try require(got.contains(needle.string ?? "\u{0}"), "section lacks \(needle.text):\n\(got)")
            }
        }
    }

    func testSnapshotRuntimeSuite() throws {
        try run(["snapshot_runtime"]) { v in
            guard let runtime = v["runtime"]?.string, let mode = v["mode"]?.string, let expect = v["expect"] else {
                throw VectorFailure("malformed vector")
            }
            let got = try JSON.parse(try mapCliRuntime(runtime: runtime, mode: mode))
            if let m = subsetMismatch(expect, got, "mapping") { throw VectorFailure(m) }
        }
    }

    // ---- suites reducer and scope_hash -----------------------------------------------------

    func testReducerSuite() throws {
        try run(["reducer"]) { v in
            guard let inputs = v["inputs"]?.array, let expected = v["expected"] else { throw VectorFailure("malformed vector") }
            let got = try JSON.parse(try reduceAll(state: nil, inputs: JSON.array(inputs).text))
            try require(got == expected, "expected \(expected.text)\n got \(got.text)")
            // One input at a time, the state round-tripped through JSON text, agrees.
            var state: String? = nil
            for input in inputs { state = try reduce(state: state, input: input.text) }
            let stepwise = try JSON.parse(state ?? reduceAll(state: nil, inputs: "[]"))
            try require(stepwise == got, "stepwise reduction disagrees: \(stepwise.text)")
        }
    }

    func testScopeHashSuite() throws {
        try run(["scope_hash"]) { v in
            guard let scope = v["scope"], let want = v["scope_hash"]?.string else { throw VectorFailure("malformed vector") }
            if let a = v["action"], let kind = a["kind"]?.string, let target = a["target"]?.string {
                let got = try JSON.parse(
                    try scopeFromAction(kind: kind, target: target, tool: a["tool"]?.string, cwd: v["cwd"]?.string))
                try require(got == scope, "scope: expected \(scope.text), got \(got.text)")
            }
            let hash = try scopeHash(scope: scope.text)
            try require(hash == want, "scope_hash: expected \(want), got \(hash)")
        }
    }

    // ---- checker suites (the document's defaults/policy apply to every vector) -------------

    func runWithDoc(_ suite: String, _ body: (JSON, JSON) throws -> Void) throws {
        var count = 0
        for file in try vectorFiles() where file.suite == suite {
            for (i, v) in (file.doc["vectors"]?.array ?? []).enumerated() {
                count += 1
                do { try body(file.doc, v) } catch { XCTFail("\(file.name)[\(i)] \(v["why"]?.string ?? ""): \(error)") }
            }
        }
        XCTAssertGreaterThan(count, 0, "no vectors for suite \(suite)")
        print("conformance \(suite): \(count) vectors")
    }

    func testCheckersNetworkSuite() throws {
        try runWithDoc("checkers_network") { doc, v in
            guard case var .object(net)? = doc["defaults"]?["network"], let target = v["target"]?.string,
                let expect = v["expect"], let policyJSON = v["policy"] ?? doc["defaults"]?["policy"]
            else { throw VectorFailure("malformed vector") }
            if case let .object(overrides)? = v["network"] { net.merge(overrides) { $1 } }
            let policy = try Policy.fromJson(text: policyJSON.text, origin: nil)
            let got = try checkNetwork(network: JSON.object(net).text, policy: policy, target: target, tool: nil)
            try require(got.verdict.effect.description == expect["effect"]?.string, "effect: got \(got.verdict), want \(expect.text)")
            if let reason = expect["reason"]?.string {
                try require(got.verdict.reason == reason, "reason: got \(got.verdict.reason), want \(reason)")
            }
        }
    }

    func testCheckersShellSuite() throws {
        let process = """
            {"shell_enabled": true, "inherit_stdin": false, "inherit_session": false, "env": "filtered",
             "max_duration_ms": 1000, "denied_commands": [], "allowed_command_families": []}
            """
        let cwd = FileManager.default.temporaryDirectory.resolvingSymlinksInPath().path
        let sandbox = JSON.object([
            "mode": .string("unrestricted"), "cwd": .string(cwd), "filesystem": .object(["entries": .array([])]),
            "tmp": .string("host"),
            "network": .object([
                "mode": .string("enabled"), "allowed_domains": .array([]), "denied_domains": .array([]),
                "allow_localhost": .bool(false), "allow_unix_sockets": .bool(false), "allowed_tcp_ports": .array([]),
            ]),
            "backend_requirement": .string("optional"), "backend_preference": .string("none"),
        ]).text
        try runWithDoc("checkers_shell") { doc, v in
            guard let policyJSON = doc["policy"], let line = v["line"]?.string, let expect = v["expect"],
                let effect = expect["effect"]?.string
            else { throw VectorFailure("malformed vector") }
            let policy = try Policy.fromJson(text: policyJSON.text, origin: nil)
            // The explanation and the enforced plan must agree.
            try require(try policy.check("shell_command", line).description == effect, "explain disagrees with \(effect)")
            let plan = try planSpawn(
                sandbox: sandbox, process: process, policy: policy, commandLine: line, cwd: nil, env: [],
                timeoutMs: nil, tool: nil)
            try require(plan.verdict.effect.description == effect, "plan gave \(plan.verdict), want \(effect)")
            let parsed = parseCommandLine(line: line)
            for p in expect["programs_include"]?.array ?? [] {
                try require(parsed.programs.contains(p.string ?? ""), "program \(p.text) not reported: \(parsed)")
            }
            if let unresolved = expect["unresolved_include"]?.array {
                if unresolved.isEmpty { try require(parsed.unresolved.isEmpty, "expected nothing unresolved: \(parsed)") }
                for u in unresolved {
                    try require(parsed.unresolved.contains(u.string ?? ""), "unresolved \(u.text) not reported: \(parsed)")
                }
            }
        }
        // The plan is the facade's record: its filtered environment keeps variables by name, as
        // bytes, and lists every simple command with its own verdict.
        let plan = try planSpawn(
            sandbox: sandbox, process: process, policy: try Policy.mode("supervised"), commandLine: "ls | wc -l",
            cwd: nil, env: [EnvVar(name: Data("LANG".utf8), value: Data("C".utf8)),
                            EnvVar(name: Data("GITHUB_TOKEN".utf8), value: Data("x".utf8))],
            timeoutMs: nil, tool: nil)
        XCTAssertEqual(plan.commands.map(\.program), ["ls", "wc"])
        XCTAssertTrue(plan.env.vars.contains(EnvVar(name: Data("LANG".utf8), value: Data("C".utf8))), "\(plan.env)")
        XCTAssertEqual(plan.env.dropped, [DroppedVar(name: "GITHUB_TOKEN", reason: "secret_name")])
        XCTAssertFalse(plan.inheritStdin)
        let env = try filterEnv(vars: [EnvVar(name: Data([0x41, 0xFF]), value: Data([0xFE]))], mode: "all", cwd: "/w",
                                untrustedPathRoots: [])
        XCTAssertEqual(env.vars.first, EnvVar(name: Data([0x41, 0xFF]), value: Data([0xFE])))
    }

    func bytes(_ v: JSON?) throws -> Data {
        if let s = v?.string { return Data(s.utf8) }
        guard let hex = v?["hex"]?.string, hex.count % 2 == 0 else { throw VectorFailure("bad text \(v?.text ?? "nil")") }
        var out = Data()
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            guard let b = UInt8(hex[i..<j], radix: 16) else { throw VectorFailure("bad hex \(hex)") }
            out.append(b)
            i = j
        }
        return out
    }

    func testCheckersEnvSuite() throws {
        try runWithDoc("checkers_env") { _, v in
            let name = try bytes(v["name"]), value = try bytes(v["value"])
            guard let expect = v["expect"], case let .bool(kept)? = expect["kept"], let m = v["mode"]?.string else {
                throw VectorFailure("malformed vector")
            }
            let mode = (m == "all" || m == "none") ? m : "filtered"
            let env = try filterEnv(vars: [EnvVar(name: name, value: value)], mode: mode, cwd: "/w", untrustedPathRoots: [])
            let gotKept = env.vars.contains { $0.name == name }
            let reason = env.dropped.first?.reason
            try require(gotKept == kept, "kept=\(gotKept) reason=\(reason ?? "nil")")
            if let want = expect["reason"]?.string {
                try require(reason == want, "kept=\(gotKept) reason=\(reason ?? "nil"), want \(want)")
            }
        }
    }

    // ---- the runner covers every file --------------------------------------------------------

    static let runSuites: Set<String> = [
        "policy", "policy_serde", "snapshot_resolve", "snapshot_cap", "snapshot_prompt",
        "snapshot_runtime", "reducer", "scope_hash", "checkers_network", "checkers_shell",
        "checkers_env", "gate", "policy_turn", "policy_lint", "replay", "changes_serde", "store",
    ]

    func testEverySuiteOnDiskIsRunOrListedWithAReason() throws {
        let files = try vectorFiles()
        XCTAssertFalse(files.isEmpty, "no vector files in \(conformanceDir.path)")
        for file in files {
            XCTAssertFalse(file.suite.isEmpty, "\(file.name): no suite")
            XCTAssertTrue(
                Self.runSuites.contains(file.suite) || notRunHere[file.suite] != nil,
                "\(file.name): suite \(file.suite) is neither run by the Swift runner nor listed in notRunHere with a reason")
            if let reason = notRunHere[file.suite] {
                print("conformance \(file.suite): not run here: \(reason)")
            }
        }
        let present = Set(files.map(\.suite))
        XCTAssertTrue(Self.runSuites.isSubset(of: present), "no vector file for \(Self.runSuites.subtracting(present))")
    }
}
