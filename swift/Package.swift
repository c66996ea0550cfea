// swift-tools-version:6.0
// The TurnGate Swift package: the UniFFI-generated bindings of turngate-ffi (generated at build
// by scripts/test-swift into Sources/turngateFFI and Sources/TurnGateBindings, never edited or
// checked in), and a thin idiomatic layer (Sources/TurnGate).
//
// The Rust static library is expected in swift/.rust/lib (scripts/test-swift puts it there);
// TURNGATE_LIB_DIR overrides that.
import PackageDescription
import Foundation

let packageDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
let libDir = ProcessInfo.processInfo.environment["TURNGATE_LIB_DIR"].flatMap { $0.isEmpty ? nil : $0 }
    ?? packageDir + "/.rust/lib"

#if os(macOS)
let systemLibraries: [LinkerSetting] = [
    .linkedFramework("Security"), .linkedFramework("CoreFoundation"),
]
#else
let systemLibraries: [LinkerSetting] = [
    .linkedLibrary("m"), .linkedLibrary("dl"), .linkedLibrary("pthread"), .linkedLibrary("rt"),
]
#endif

let package = Package(
    name: "TurnGate",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "TurnGate", targets: ["TurnGate"]),
    ],
    targets: [
        // The C header and module map UniFFI generates (module.modulemap, per docs/bindings-swift-c.md).
        .systemLibrary(name: "turngateFFI", path: "Sources/turngateFFI"),
        // The generated Swift. Swift 6 language mode crashes the compiler on the generated
        // async-callback code, so this target is compiled in Swift 5 mode.
        .target(
            name: "TurnGateBindings",
            dependencies: ["turngateFFI"],
            path: "Sources/TurnGateBindings",
            swiftSettings: [.swiftLanguageMode(.v5)],
            linkerSettings: [
                .unsafeFlags(["-L", libDir]),
                .linkedLibrary("turngate_ffi"),
            ] + systemLibraries
        ),
        .target(name: "TurnGate", dependencies: ["TurnGateBindings"], path: "Sources/TurnGate"),
        .executableTarget(
            name: "TurnGateBench", dependencies: ["TurnGate"], path: "Sources/TurnGateBench"),
        // The cross-language golden test's Swift driver (scripts/test-golden).
        .executableTarget(
            name: "TurnGateGolden", dependencies: ["TurnGate"], path: "Sources/TurnGateGolden",
            swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(name: "TurnGateTests", dependencies: ["TurnGate"], path: "Tests/TurnGateTests"),
    ]
)
