// A small JSON value for the conformance runner: parsed from text (numbers keep their literal
// so nothing is re-spelled), serialized back, compared as JSON values.
import Foundation

enum JSON: Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y || Double(x) == Double(y)
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x == y
        default: return false
        }
    }

    subscript(key: String) -> JSON? {
        if case let .object(o) = self { return o[key] }
        return nil
    }

    var string: String? {
        if case let .string(s) = self { return s }
        return nil
    }

    var array: [JSON]? {
        if case let .array(a) = self { return a }
        return nil
    }

    var int: Int? {
        if case let .number(n) = self { return Int(n) }
        return nil
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The JSON text.
    var text: String {
        switch self {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return n
        case let .string(s): return JSON.quote(s)
        case let .array(a): return "[" + a.map(\.text).joined(separator: ",") + "]"
        case let .object(o):
            return "{" + o.keys.sorted().map { JSON.quote($0) + ":" + o[$0]!.text }
                .joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20: out += String(format: "\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ text: String) throws -> JSON {
        var p = Parser(bytes: Array(text.utf8))
        let v = try p.value()
        p.skip()
        guard p.i == p.bytes.count else { throw ParseError(description: "trailing data at \(p.i)") }
        return v
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        mutating func skip() {
            while i < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[i]) { i += 1 }
        }

        mutating func expect(_ s: String) throws {
            for b in s.utf8 {
                guard i < bytes.count, bytes[i] == b else { throw ParseError(description: "expected \(s) at \(i)") }
                i += 1
            }
        }

        mutating func value() throws -> JSON {
            skip()
            guard i < bytes.count else { throw ParseError(description: "unexpected end") }
            switch bytes[i] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                i += 1
                var items: [JSON] = []
                skip()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                while true {
                    items.append(try value())
                    skip()
                    guard i < bytes.count else { throw ParseError(description: "unterminated array") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    try expect("]")
                    return .array(items)
                }
            case UInt8(ascii: "{"):
                i += 1
                var members: [String: JSON] = [:]
                skip()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                while true {
                    skip()
                    let k = try string()
                    skip()
                    try expect(":")
                    members[k] = try value()
                    skip()
                    guard i < bytes.count else { throw ParseError(description: "unterminated object") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    try expect("}")
                    return .object(members)
                }
            default:
                let start = i
                while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
                guard i > start else { throw ParseError(description: "unexpected byte at \(i)") }
                return .number(String(decoding: bytes[start..<i], as: UTF8.self))
            }
        }

        mutating func string() throws -> String {
            try expect("\"")
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() { scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars); raw = [] }
            while i < bytes.count {
                let b = bytes[i]
                i += 1
                if b == UInt8(ascii: "\"") { flush(); return String(scalars) }
                if b != UInt8(ascii: "\\") { raw.append(b); continue }
                flush()
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        try expect("\\u")
                        let low = try hex4()
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let s = Unicode.Scalar(code) else { throw ParseError(description: "bad escape") }
                    scalars.append(s)
                default: scalars.append(Unicode.Scalar(e))
                }
            }
            throw ParseError(description: "unterminated string")
        }

        mutating func hex4() throws -> UInt32 {
            guard i + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16)
            else { throw ParseError(description: "bad \\u escape at \(i)") }
            i += 4
            return v
        }
    }
}

/// `expect` matches `actual` when every key of an expected object matches, arrays have the
/// same length and match element-wise, and scalars are equal (null matches missing).
func subsetMismatch(_ expect: JSON, _ actual: JSON?, _ path: String) -> String? {
    switch (expect, actual) {
    case let (.object(e), .object(a)?):
        for (k, v) in e.sorted(by: { $0.key < $1.key }) {
            if let m = subsetMismatch(v, a[k], "\(path).\(k)") { return m }
        }
        return nil
    case let (.array(e), .array(a)?):
        guard e.count == a.count else { return "\(path): expected \(e.count) elements, got \(a.count)" }
        for (n, (x, y)) in zip(e, a).enumerated() {
            if let m = subsetMismatch(x, y, "\(path)[\(n)]") { return m }
        }
        return nil
    case (.null, nil):
        return nil
    default:
        return expect == (actual ?? .null) ? nil : "\(path): expected \(expect.text), got \(actual?.text ?? "missing")"
    }
}
