//! What the `safenic` binary links besides the driver library: its command line, the driver
//! manifest (TOML), the bench's results (JSON) and figures (PNG, SVG). None of it runs on the
//! packet path, but all of it runs in the driver's process, so its code is ours too: each crate
//! is listed with why it is there, pinned by the checksum `Cargo.lock` records, and its build
//! script, if it has one, reviewed. These lists extend those of `dependencies.rs` for the
//! binary only; the driver library may not depend on any of these crates.

/// The driver binary, whose whole graph is checked.
pub const BINARY_CRATES: [&str; 1] = ["safenic"];

/// The binary's own path crates beyond the driver's, each only at `crates/<name>`: they forbid
/// unsafe code, and the audit reads their code after every macro is expanded (`expanded.rs`).
pub const TOOL_PATH_CRATES: &[&str] = &["safenic", "cli", "bench", "manifest", "nicsim"];

/// Path crates of the binary allowed unsafe code (rooms of the unsafe budget, `budget.rs`,
/// where every block is counted and needs its `// SAFETY:`), each only at `crates/<name>`.
pub const TOOL_ROOMS: &[(&str, &str)] = &[(
    "isolation",
    "domains for C libraries (docs/isolation.md): `safenic fwd --filter` calls a C packet filter in one, the bench measures them",
)];

/// Crates.io crates the binary may link beyond the driver's, and why.
pub const TOOL_ALLOWED: &[(&str, &str)] = &[
    ("clap", "the command line: subcommands, options, help"),
    ("clap_builder", "clap's parser"),
    ("clap_derive", "clap's derive (a proc macro: runs at build time)"),
    ("clap_lex", "clap's splitting of arguments"),
    ("heck", "clap_derive's case conversion, at build time"),
    ("strsim", "clap's suggestions for a mistyped option"),
    ("anstream", "clap's styled output"),
    ("anstyle", "clap's styles"),
    ("anstyle-parse", "anstream's escape-sequence parser"),
    ("anstyle-query", "anstream's terminal query"),
    ("colorchoice", "anstream's colour setting"),
    ("is_terminal_polyfill", "anstream's terminal test"),
    ("utf8parse", "anstyle-parse's UTF-8 decoder"),
    ("serde", "reading and writing the bench's results and the manifest"),
    ("serde_core", "serde's traits"),
    ("serde_derive", "serde's derives (a proc macro: runs at build time)"),
    ("serde_json", "the bench's results as JSON"),
    ("itoa", "serde_json's integer formatting"),
    ("zmij", "serde_json's float formatting"),
    ("memchr", "byte search for serde_json and winnow"),
    ("toml", "reading the driver manifest, drivers/drivers.toml"),
    ("toml_edit", "toml's parser"),
    ("toml_datetime", "toml's date type"),
    ("serde_spanned", "toml's source positions"),
    ("winnow", "toml_edit's parser combinators"),
    ("indexmap", "toml_edit's ordered tables"),
    ("hashbrown", "indexmap's hash table"),
    ("equivalent", "indexmap's key comparison"),
    ("plotters", "the bench's figures"),
    ("plotters-backend", "plotters' drawing interface"),
    ("plotters-bitmap", "plotters' PNG back end"),
    ("plotters-svg", "plotters' SVG back end"),
    ("num-traits", "plotters' numeric axes"),
    ("once_cell", "plotters' lazily made statics"),
    ("ab_glyph", "drawing the figures' text"),
    ("ab_glyph_rasterizer", "ab_glyph's rasterizer"),
    ("owned_ttf_parser", "ab_glyph's font parser"),
    ("ttf-parser", "owned_ttf_parser's font tables"),
    ("epaint_default_fonts", "a font built in, so that figures need no system font"),
    ("png", "writing the figures as PNG"),
    ("fdeflate", "png's fast deflate"),
    ("flate2", "png's compression"),
    ("miniz_oxide", "deflate for flate2 and png"),
    ("zlib-rs", "flate2's deflate back end"),
    ("adler2", "miniz_oxide's Adler-32 checksum"),
    ("simd-adler32", "fdeflate's Adler-32 checksum"),
    ("crc32fast", "png's CRC-32 checksums"),
    ("cfg-if", "crc32fast's choice of implementation by target"),
];

/// Build scripts of the binary's crates, each reviewed: all but isolation's detect compiler
/// features or the target and print cfgs; isolation's compiles its C (csrc/) into shared
/// objects it embeds as bytes and loads only into domains, and links libdl.
pub const TOOL_BUILD_SCRIPTS: &[(&str, &str)] = &[
    ("isolation", "compiles csrc/*.c into shared objects embedded as bytes, loaded only into domains; links libdl"),
    ("safenic", "writes the conformance suite's list of drivers from drivers/drivers.toml into OUT_DIR"),
    ("serde", "detects the rustc version for cfgs"),
    ("serde_core", "detects the rustc version for cfgs"),
    ("serde_json", "detects the target's pointer width for cfgs"),
    ("zmij", "detects the rustc version and optimisation level for cfgs"),
    ("num-traits", "detects float methods (autocfg) for cfgs"),
    ("crc32fast", "detects rustc's stable intrinsics for cfgs"),
];

/// The exact versions reviewed, by the checksum in Cargo.lock. After `cargo update`, review the
/// new version and pin its checksum here (or in `dependencies.rs` for the driver's crates).
pub const TOOL_PINNED: &[(&str, &str, &str)] = &[
    ("ab_glyph", "0.2.32", "01c0457472c38ea5bd1c3b5ada5e368271cb550be7a4ca4a0b4634e9913f6cc2"),
    ("ab_glyph_rasterizer", "0.1.10", "366ffbaa4442f4684d91e2cd7c5ea7c4ed8add41959a31447066e279e432b618"),
    ("adler2", "2.0.1", "320119579fcad9c21884f5c4861d16174d0e06250625266f50fe6898340abefa"),
    ("anstream", "1.0.0", "824a212faf96e9acacdbd09febd34438f8f711fb84e09a8916013cd7815ca28d"),
    ("anstyle", "1.0.14", "940b3a0ca603d1eade50a4846a2afffd5ef57a9feac2c0e2ec2e14f9ead76000"),
    ("anstyle-parse", "1.0.0", "52ce7f38b242319f7cabaa6813055467063ecdc9d355bbb4ce0c68908cd8130e"),
    ("anstyle-query", "1.1.5", "40c48f72fd53cd289104fc64099abca73db4166ad86ea0b4341abe65af83dadc"),
    ("bitflags", "1.3.2", "bef38d45163c2f1dde094a7dfd33ccf595c92905c8f8f4fdc18d06fb1037718a"),
    ("cfg-if", "1.0.5", "4e7648175b45a9a48536d676f68d918270699102aa8dab5496df06904c914600"),
    ("clap", "4.6.7", "aa8876b300ab35ba921adea3dfd70157a46249b33f95c9084ae5709785478946"),
    ("clap_builder", "4.6.7", "ec0797fb7aeb1406c84efac526901f7ec3ead2124f946b494e72879d4b54704d"),
    ("clap_derive", "4.6.7", "f9c751b79415d4e559e3d1fcf128e09e720eb673a06d26cf6f392d37d75b66e0"),
    ("clap_lex", "1.1.1", "1c133bc6a41be0d194c306b5506d15e6feeea7b1d6604bd3f8310dfb2ca96486"),
    ("colorchoice", "1.0.5", "1d07550c9036bf2ae0c684c4297d503f838287c83c53686d05370d0e139ae570"),
    ("crc32fast", "1.5.5", "2b929dd2a135771f40afabd1073f85eed59c800b7c61901e5c254270497dad64"),
    ("epaint_default_fonts", "0.33.3", "5c4fbe202b6578d3d56428fa185cdf114a05e49da05f477b3c7f0fbb221f1862"),
    ("equivalent", "1.0.3", "00d174d5400e5e8fd687ad1049e2f578285fa914201b1af7e8b112a4546bd826"),
    ("fdeflate", "0.3.7", "1e6853b52649d4ac5c0bd02320cddc5ba956bdb407c4b75a2c6b75bf51500f8c"),
    ("flate2", "1.1.11", "626d4928326b646e70f65ed36fc7cf9f206bdb68a0019ee7c6b4709da4e084c4"),
    ("hashbrown", "0.17.1", "ed5909b6e89a2db4456e54cd5f673791d7eca6732202bbf2a9cc504fe2f9b84a"),
    ("heck", "0.5.0", "2304e00983f87ffb38b55b444b5e3b60a884b5d30c0fca7d82fe33449bbe55ea"),
    ("indexmap", "2.14.2", "cc4e190f5d26ca7051642629da2c52fc03bde85a03197c99408dcd291734c855"),
    ("is_terminal_polyfill", "1.70.2", "a6cb138bb79a146c1bd460005623e142ef0181e3d0219cb493e02f7d08a35695"),
    ("itoa", "1.0.18", "8f42a60cbdf9a97f5d2305f08a87dc4e09308d1276d28c869c684d7777685682"),
    ("memchr", "2.8.3", "cf8baf1c55e62ffcace7a9f06f4bd9cd3f0c4beb022d3b367256b91b87513d98"),
    ("miniz_oxide", "0.8.9", "1fa76a2c86f704bdb222d66965fb3d63269ce38518b83cb0575fca855ebb6316"),
    ("miniz_oxide", "0.9.1", "b63fbc4a50860e98e7b2aa7804ded1db5cbc3aff9193adaff57a6931bf7c4b4c"),
    ("num-traits", "0.2.19", "071dfc062690e90b734c0b2273ce72ad0ffa95f0c74596bc250dcfd960262841"),
    ("once_cell", "1.21.4", "9f7c3e4beb33f85d45ae3e3a1792185706c8e16d043238c593331cc7cd313b50"),
    ("owned_ttf_parser", "0.25.1", "36820e9051aca1014ddc75770aab4d68bc1e9e632f0f5627c4086bc216fb583b"),
    ("plotters", "0.3.7", "5aeb6f403d7a4911efb1e33402027fc44f29b5bf6def3effcc22d7bb75f2b747"),
    ("plotters-backend", "0.3.7", "df42e13c12958a16b3f7f4386b9ab1f3e7933914ecea48da7139435263a4172a"),
    ("plotters-bitmap", "0.3.7", "72ce181e3f6bf82d6c1dc569103ca7b1bd964c60ba03d7e6cdfbb3e3eb7f7405"),
    ("plotters-svg", "0.3.7", "51bae2ac328883f7acdfea3d66a7c35751187f870bc81f94563733a154d7a670"),
    ("png", "0.17.16", "82151a2fc869e011c153adc57cf2789ccb8d9906ce52c0b39a6b5697749d7526"),
    ("serde", "1.0.229", "4148590afebada386688f18773da617792bf2ef03ffc1e4cbd2b1d45b023e0ba"),
    ("serde_core", "1.0.229", "67dca2c9c51e58a4791a4b1ed58308b39c64224d349a935ab5039aa360942a48"),
    ("serde_derive", "1.0.229", "e7a5d71263a5a7d47b41f6b3f06ba276f10cc18b0931f1799f710578e2309348"),
    ("serde_json", "1.0.154", "e7e9cc8b1b85264074fbcc02a88680c4096b1e47df8f739dceb03bf482f04bd6"),
    ("serde_spanned", "0.6.9", "bf41e0cfaf7226dca15e8197172c295a782857fcb97fad1808a166870dee75a3"),
    ("simd-adler32", "0.3.10", "3a219298ac11a56ea9a6d2120044824d6f01aeb034955e7af7bc16858527deea"),
    ("strsim", "0.11.1", "7da8b5736845d9f2fcb837ea5d9e2628564b3b043a70948a3f0b778838c5fb4f"),
    ("syn", "3.0.9", "d78c8dee4c7bf0e14673097256fed6142ce9d3b85a408189d07482442145823b"),
    ("toml", "0.8.23", "dc1beb996b9d83529a9e75c17a1686767d148d70663143c7854d8b4a09ced362"),
    ("toml_datetime", "0.6.11", "22cddaf88f4fbc13c51aebbf5f8eceb5c7c5a9da2ac40a13519eb5b0a0e8f11c"),
    ("toml_edit", "0.22.27", "41fe8c660ae4257887cf66394862d21dbca4a6ddd26f04a3560410406a2f819a"),
    ("ttf-parser", "0.25.1", "d2df906b07856748fa3f6e0ad0cbaa047052d4a7dd609e231c4f72cee8c36f31"),
    ("utf8parse", "0.2.2", "06abde3611657adf66d383f00b093d7faecc7fa57071cce2578660c9f1010821"),
    ("winnow", "0.7.15", "df79d97927682d2fd8adb29682d1140b343be4ac0f08fd68b7765d9c059d3945"),
    ("zlib-rs", "0.6.8", "b268e58e7c693d7c271f93ffc4ba3b380412554231c85bf61ca7af91042a4112"),
    ("zmij", "1.0.23", "29666d0abbfad1e3dc4dcf6144730dd3a3ab225bbbdac83319345b1b44ccfc1b"),
];
