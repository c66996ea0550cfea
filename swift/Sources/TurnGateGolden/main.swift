// The golden calls through the Swift binding: one JSON line per call (tests/golden/README.md).
// Results are encoded generically by reflection (no per-record code): a record's stored
// properties by name, an enum case with fields as `{"outcome": case, fields...}`, and a
// protocol object (which UniFFI carries as JSON text) as the JSON it holds. Swift's names are
// camelCase; scripts/test-golden snake_cases keys.
import Foundation
import TurnGate

func encode(_ v: Any) -> Any {
    if let s = v as? String {
        if s.hasPrefix("{") || s.hasPrefix("["),
            let j = try? JSONSerialization.jsonObject(with: Data(s.utf8), options: [.fragmentsAllowed])
        {
            return j
        }
        return s
    }
    if let d = v as? Data { return d.map { NSNumber(value: $0) } }  // bytes: their values, as serde writes them
    if let b = v as? Bool { return NSNumber(value: b) }
    if let e = v as? Effect { return e.description }
    if let n = v as? any BinaryInteger { return NSNumber(value: Int64(n)) }
    let m = Mirror(reflecting: v)
    switch m.displayStyle {
    case .optional:
        return m.children.first.map { encode($0.value) } ?? NSNull()
    case .collection, .set:
        return m.children.map { encode($0.value) }
    case .struct, .class:
        return fields(m)
    case .enum:
        guard let (name, payload) = m.children.first.map({ ($0.label ?? "", $0.value) }) else {
            return String(describing: v)
        }
        var out = fields(Mirror(reflecting: payload))
        out["outcome"] = name
        return out
    case .tuple:
        return fields(m)
    default:
        return String(describing: v)
    }
}

func fields(_ m: Mirror) -> [String: Any] {
    var out: [String: Any] = [:]
    for c in m.children { if let l = c.label { out[l] = encode(c.value) } }
    return out
}

func text(_ v: Any) -> String {
    let data = try! JSONSerialization.data(withJSONObject: v, options: [.sortedKeys, .fragmentsAllowed])
    return String(decoding: data, as: UTF8.self)
}

func subst(_ v: Any, _ ws: String) -> Any {
    if let s = v as? String { return s.replacingOccurrences(of: "$WS", with: ws) }
    if let a = v as? [Any] { return a.map { subst($0, ws) } }
    if let d = v as? [String: Any] { return d.mapValues { subst($0, ws) } }
    return v
}

func policy(_ spec: [String: Any]) throws -> Policy {
    if spec["tiered"] != nil { return try Policy.tiered() }
    if let m = spec["mode"] as? String { return try Policy.mode(m) }
    return try Policy.fromJson(text: text(spec["json"]!), origin: nil)
}

actor Asks {
    var seen: [ApprovalAsk] = []
    func add(_ a: ApprovalAsk) { seen.append(a) }
}

func gate(_ a: [String: Any], _ tmp: String, _ i: Int, _ asks: Asks) throws -> Gate {
    let answer: Decision
    switch a["approver"] as? String {
    case "deny": answer = .deny(reason: "the golden approver said no")
    case "defer": answer = .defer
    default: answer = .approve
    }
    let snapshot = try resolveSnapshot(selection: text(a["selection"]!), context: text(a["context"]!), cap: nil)
    let approver = GateApprover.swift { ask in
        await asks.add(ask)
        return answer
    }
    return try Gate(turnId: "golden", snapshot: snapshot, store: try Store.open(path: "\(tmp)/\(i).db"),
                    approver: approver, broker: nil)
}

func invocation(_ v: Any?) -> Invocation {
    let d = v as? [String: Any] ?? [:]
    return Invocation(kind: d["kind"] as? String ?? "", target: d["target"] as? String ?? "",
                      tool: d["tool"] as? String, itemId: d["item_id"] as? String,
                      toolId: d["tool_id"] as? String, cwd: d["cwd"] as? String)
}

func run(_ call: String, _ a: [String: Any], _ tmp: String, _ i: Int) async throws -> Any {
    let kind = a["kind"] as? String ?? "", target = a["target"] as? String ?? ""
    let tool = a["tool"] as? String
    switch call {
    case "policy.check":
        return encode(try policy(a["policy"] as! [String: Any]).check(kind: kind, target: target, tool: tool))
    case "policy.explain":
        return encode(try policy(a["policy"] as! [String: Any]).explain(kind: kind, target: target, tool: tool))
    case "policy.check_batch":
        let actions = (a["actions"] as! [[String: Any]]).map {
            Action(kind: $0["kind"] as! String, target: $0["target"] as! String, tool: $0["tool"] as? String)
        }
        return encode(try policy(a["policy"] as! [String: Any]).checkBatch(actions: actions))
    case "snapshot.resolve":
        return encode(try resolveSnapshot(selection: text(a["selection"]!), context: text(a["context"]!), cap: nil))
    case "command.parse":
        return encode(parseCommandLine(line: a["line"] as! String))
    case "env.filter":
        let vars = (a["vars"] as! [[String: String]]).map {
            EnvVar(name: Data($0["name"]!.utf8), value: Data($0["value"]!.utf8))
        }
        return encode(try filterEnv(vars: vars, mode: a["mode"] as! String, cwd: a["cwd"] as! String,
                                    untrustedPathRoots: a["untrusted_path_roots"] as! [String]))
    case "gate.evaluate":
        return encode(try gate(a, tmp, i, Asks()).evaluate(invocation: invocation(a["invocation"])))
    case "gate.authorize":
        let asks = Asks()
        let g = try gate(a, tmp, i, asks)
        let auth = try await g.authorize(invocation: invocation(a["invocation"]))
        return ["authorization": encode(auth), "asks": encode(await asks.seen)]
    case "reduce_all":
        return encode(try reduceAll(state: nil, inputs: text(a["inputs"]!)))
    case "scope.from_action":
        return encode(try scopeFromAction(kind: kind, target: target, tool: tool, cwd: a["cwd"] as? String))
    case "scope.hash":
        return try scopeHash(scope: text(a["scope"]!))
    case "changes.parse":
        return encode(try parseChangeSet(json: text(a["change_set"]!)))
    case "changes.show":
        return encode(try Store.open(path: "\(tmp)/\(i).db").changeSet(id: a["id"] as! String))
    default:
        fatalError("unknown call \(call)")
    }
}

func errorType(_ e: TurnGateError) -> (String, String) {
    switch e {
    case let .Policy(message, _, _, _): return ("Policy", message)
    case let .Snapshot(_, message): return ("Snapshot", message)
    case let .Store(message): return ("Store", message)
    case let .SandboxUnavailable(message): return ("SandboxUnavailable", message)
    case let .Approval(message): return ("Approval", message)
    case let .Run(message): return ("Run", message)
    case let .Changes(_, message, _): return ("Changes", message)
    case let .InvalidInput(message): return ("InvalidInput", message)
    }
}

// The workspace and scratch directories come as arguments: scripts/swift-env clears the
// environment.
let args = CommandLine.arguments
guard args.count == 4 else { fatalError("usage: TurnGateGolden CALLS.json WS TMP") }
let ws = args[2], tmp = args[3]
let doc = try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: CommandLine.arguments[1]))) as! [String: Any]
for (i, c) in (doc["calls"] as! [[String: Any]]).enumerated() {
    var out: [String: Any] = ["name": c["name"]!]
    do {
        out["result"] = try await run(c["call"] as! String, subst(c["args"]!, ws) as! [String: Any], tmp, i)
    } catch let e as TurnGateError {
        let (type, message) = errorType(e)
        out["error"] = ["type": type, "message": message]
    }
    print(text(out))
}
