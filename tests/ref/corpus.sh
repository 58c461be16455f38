#!/usr/bin/env bash
# Builds the tokenizer test corpus (or, with --bench, the English benchmark corpus) as JSON lines.
#
#   tests/ref/corpus.sh [--bench] OUT.jsonl
#
# Test corpus (default: 1735 documents, 17.9 MB of text, a 21 MB file, ~15 s on 2 cores): REAL
# text in ~35 languages and scripts, from Debian packages only, so it is the same on every machine
# with the same package versions:
#   - translated UI messages (the msgstr side of gettext catalogs, /usr/share/locale/LANG/*.mo,
#     parsed directly) of the packages in CAT_PKGS, ~2-20 KB of messages per document;
#   - man pages rendered to plain text with groff (manpages-{fr,de,ru,ja,zh,es}, and English from
#     manpages/manpages-dev), one page per document, raw groff layout (indentation runs kept);
#   - emoji: unicode-data's emoji-test.txt as "emoji name" lines (ZWJ sequences, skin tones, flags,
#     keycaps, tag sequences);
#   - hand-written edge cases (every Unicode whitespace kind, \r\n, tabs, trailing spaces, combining
#     marks, jamo, ZWJ/skin tones/flags, contractions with ' and ’ in both cases, digits mixed with
#     letters, very long words and runs, a literal "<|endoftext|>" and other special-token strings,
#     an empty and a whitespace-only document, letters and digits new in Unicode 16, a 1 MB line).
# Documents are shuffled with a fixed seed. Every line has "text", "title" (strings) and "meta"
# (an object); key order and JSON style vary (compact with raw UTF-8, or Python json.dumps style
# with ensure_ascii: \uXXXX escapes with surrogate pairs), so a JSON reader is exercised too.
#
# Bench corpus (--bench: 8959 documents, 52.1 MB of text, ~70 s): English only: the 1000
# OpenWebText documents of ../shared/data/megatron/openwebtext-1000.jsonl (or $LMTK_OWT) six
# times, English man pages reflowed into paragraphs (one page per document) and vim's help files
# (one section per document, reflowed), shuffled with a fixed seed; lines are {"text": ...} compact.
#
# Cached: OUT is rebuilt only when OUT.stamp (this script's sha256 + source package versions +
# input checksums) differs. Needs node, groff (groff-base), gzip, and the packages below.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ME=corpus
bench=0
[ "${1:-}" = --bench ] && { bench=1; shift; }
[ $# -eq 1 ] || { echo "usage: $0 [--bench] OUT.jsonl" >&2; exit 2; }
out=$1

# Packages whose files are read (keep in sync with `make deps`).
CAT_PKGS="iso-codes libgtk2.0-common libglib2.0-data xkb-data shared-mime-info gsettings-desktop-schemas
  coreutils bash dpkg apt libapt-pkg6.0 libc-l10n gnupg-l10n binutils-common tar gettext findutils
  diffutils grep sed wget make"
MAN_PKGS="manpages-fr manpages-de manpages-ru manpages-ja manpages-zh manpages-es manpages manpages-dev"
EMOJI_PKGS="unicode-data"
BENCH_MAN_PKGS="manpages manpages-dev git-man openssl systemd coreutils util-linux binutils-common bash
  dpkg apt findutils tar grep sed iproute2 procps"
if [ $bench = 1 ]; then pkgs="$BENCH_MAN_PKGS vim-runtime"; else pkgs="$CAT_PKGS $MAN_PKGS $EMOJI_PKGS"; fi
command -v node >/dev/null || { echo "$ME: node is needed" >&2; exit 3; }
command -v groff >/dev/null || { echo "$ME: groff is needed (package groff-base)" >&2; exit 3; }
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] || { echo "$ME: missing Debian packages:$missing" >&2; exit 3; }

owt=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
[ $bench = 0 ] || [ -r "$owt" ] || { echo "$ME: $owt not readable (set LMTK_OWT)" >&2; exit 3; }
stamp=$( {
	sha256sum "$0" | cut -d' ' -f1
	echo "bench=$bench"
	dpkg-query -W $pkgs
	[ $bench = 1 ] && sha256sum "$owt" | cut -d' ' -f1
} | sha256sum | cut -d' ' -f1)
if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "$ME: $out is up to date ($(du -h "$out" | cut -f1))" >&2
	exit 0
fi
mkdir -p "$(dirname "$out")" || exit 3
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
BENCH=$bench OWT=$owt CAT_PKGS=$CAT_PKGS MAN_PKGS=$MAN_PKGS BENCH_MAN_PKGS=$BENCH_MAN_PKGS \
	node - "$tmp" <<'EOF' || exit 3
'use strict';
const fs = require('fs'), zlib = require('zlib'), crypto = require('crypto'), os = require('os');
const { spawn, execFileSync } = require('child_process');
const OUT = process.argv[2];
const BENCH = process.env.BENCH === '1';
const log = (...a) => console.error('corpus:', ...a);

// deterministic PRNG (mulberry32) and orderings
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const hash = (s) => crypto.createHash('sha1').update(s).digest('hex');
const byHash = (arr, key) => arr.map((x) => [hash(key(x)), x]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((p) => p[1]);
function shuffle(a, r) {
  for (let i = a.length - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [a[i], a[j]] = [a[j], a[i]]; }
  return a;
}
const utf8 = new TextDecoder('utf-8', { fatal: true });
const blen = (s) => Buffer.byteLength(s, 'utf8');

const dpkgL = new Map();
function pkgFiles(pkg, re) {
  if (!dpkgL.has(pkg)) dpkgL.set(pkg, execFileSync('dpkg', ['-L', pkg], { encoding: 'utf8', maxBuffer: 1 << 28 }).split('\n'));
  return dpkgL.get(pkg).filter((f) => re.test(f)).filter((f) => {
    try { const st = fs.lstatSync(f); return st.isFile(); } catch { return false; }
  }).sort();
}

// ---- man pages -------------------------------------------------------------------------------
// groff 1.22 has no -dAD=l: left-adjust (no justification spaces) by appending `.ad l` to TH
const ADJUST_LEFT = Buffer.from('.am TH\n.ad l\n..\n');
function renderMan(file) {
  return new Promise((resolve) => {
    let src;
    try { src = zlib.gunzipSync(fs.readFileSync(file)); } catch { return resolve(null); }
    if (/^\.so\s/m.test(src.subarray(0, 200).toString('latin1')) && src.length < 200) return resolve(null);
    const p = spawn('groff', ['-Kutf-8', '-t', '-mandoc', '-Tutf8', '-rcR=1', '-rHY=0', '-dAD=l',
      '-rLL=100n', '-P-cbou', '-Wall'], { stdio: ['pipe', 'pipe', 'ignore'], env: { ...process.env, LC_ALL: 'C.UTF-8' } });
    const chunks = [];
    p.stdout.on('data', (d) => chunks.push(d));
    p.stdin.on('error', () => {});
    p.on('close', (code) => {
      if (code !== 0) return resolve(null);
      let t;
      try { t = utf8.decode(Buffer.concat(chunks)); } catch { return resolve(null); }
      t = t.replace(/^\n+/, '').replace(/\s+$/, '');
      resolve(t.length >= 300 ? t : null);
    });
    p.stdin.end(Buffer.concat([ADJUST_LEFT, src]));
  });
}
// Renders files (already in a deterministic order) until `cap` UTF-8 bytes are collected.
async function manDocs(files, cap, lang, reflow) {
  const docs = [];
  let total = 0, next = 0;
  const par = Math.max(2, os.cpus().length);
  while (next < files.length && total < cap) {
    const batch = files.slice(next, next + par * 4);
    next += batch.length;
    const texts = await runPool(batch.map((f) => () => renderMan(f)), par);
    for (let i = 0; i < batch.length && total < cap; i++) {
      let t = texts[i];
      if (!t) continue;
      if (reflow) t = reflowText(t);
      const name = batch[i].replace(/^.*\//, '').replace(/\.gz$/, '');
      docs.push({ text: t, title: name, meta: { src: 'man:' + batch[i], lang } });
      total += blen(t);
    }
  }
  log(`man ${lang}: ${docs.length} pages, ${(total / 1e6).toFixed(2)} MB`);
  return docs;
}
async function runPool(tasks, n) {
  const res = new Array(tasks.length);
  let i = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (i < tasks.length) { const k = i++; res[k] = await tasks[k](); }
  }));
  return res;
}
// Man page layout -> prose: drop the header/footer lines, join the lines of each paragraph.
function reflowText(t, keepEnds) {
  const lines = t.split('\n');
  if (!keepEnds && lines.length > 2) { lines.shift(); lines.pop(); }
  const paras = [];
  let cur = [];
  for (const l of lines) {
    const s = l.trim();
    if (!s) { if (cur.length) paras.push(cur.join(' ')); cur = []; } else cur.push(s.replace(/\s{2,}/g, ' '));
  }
  if (cur.length) paras.push(cur.join(' '));
  return paras.join('\n\n');
}

// ---- gettext catalogs ------------------------------------------------------------------------
function moMessages(file) {
  const b = fs.readFileSync(file);
  if (b.length < 28) return [];
  let rd;
  if (b.readUInt32LE(0) === 0x950412de) rd = (o) => b.readUInt32LE(o);
  else if (b.readUInt32BE(0) === 0x950412de) rd = (o) => b.readUInt32BE(o);
  else return [];
  const n = rd(8), oo = rd(12), to = rd(16);
  const msgs = [];
  let charsetOk = false;
  for (let i = 0; i < n; i++) {
    const ol = rd(oo + 8 * i), ooff = rd(oo + 8 * i + 4), tl = rd(to + 8 * i), toff = rd(to + 8 * i + 4);
    const id = b.subarray(ooff, ooff + ol), tr = b.subarray(toff, toff + tl);
    if (ol === 0) { charsetOk = /charset=utf-8/i.test(tr.toString('latin1')); continue; }
    let t, idS;
    try { t = utf8.decode(tr); idS = utf8.decode(id); } catch { continue; }
    const ids = idS.replace(/^[^\x04]*\x04/, '').split('\0');
    t.split('\0').forEach((s, k) => { if (s.trim() && s !== ids[Math.min(k, ids.length - 1)]) msgs.push(s); });
  }
  return charsetOk ? msgs : [];
}
function catalogDocs(lang, pkgs, cap, r) {
  const docs = [];
  for (const pkg of pkgs) {
    for (const f of pkgFiles(pkg, new RegExp(`^/usr/share/locale/${lang.replace('@', '\\@')}/LC_MESSAGES/[^/]+\\.mo$`))) {
      const msgs = moMessages(f);
      const name = f.replace(/^.*\//, '').replace(/\.mo$/, '');
      let cur = [], size = 0, part = 0, want = 2000 + Math.floor(r() * 18000);
      const flush = () => {
        if (!cur.length) return;
        docs.push({ text: cur.join('\n'), title: `${name} (${lang}) part ${++part}`, meta: { src: 'mo:' + f, lang } });
        cur = []; size = 0; want = 2000 + Math.floor(r() * 18000);
      };
      for (const m of msgs) { cur.push(m); size += blen(m) + 1; if (size >= want) flush(); }
      flush();
    }
  }
  const picked = [];
  let total = 0;
  for (const d of byHash(docs, (d) => d.title)) { if (total >= cap) break; picked.push(d); total += blen(d.text); }
  log(`catalogs ${lang}: ${picked.length}/${docs.length} docs, ${(total / 1e6).toFixed(2)} MB`);
  return picked;
}

// ---- emoji -----------------------------------------------------------------------------------
function emojiDocs(r) {
  const lines = fs.readFileSync('/usr/share/unicode/emoji/emoji-test.txt', 'utf8').split('\n');
  const docs = [];
  let cur = [], group = '', want = 3000 + Math.floor(r() * 9000), size = 0;
  const flush = () => { if (cur.length) docs.push({ text: cur.join('\n'), title: 'emoji: ' + group, meta: { src: 'emoji-test.txt', lang: 'emoji' } }); cur = []; size = 0; want = 3000 + Math.floor(r() * 9000); };
  for (const l of lines) {
    let m;
    if ((m = /^# (sub)?group: (.*)/.exec(l))) { if (!m[1]) { flush(); group = m[2]; } cur.push(m[2] + ':'); continue; }
    if ((m = /^[0-9A-F ]+;\s*(fully-qualified|minimally-qualified|unqualified|component)\s*#\s*(\S+) E[0-9.]+ (.*)$/.exec(l))) {
      const s = `${m[2]} ${m[3]}`;
      cur.push(s); size += blen(s);
      if (size >= want) flush();
    }
  }
  flush();
  log(`emoji: ${docs.length} docs`);
  return docs;
}

// ---- edge cases ------------------------------------------------------------------------------
function edgeDocs() {
  const E = [];
  const add = (title, text) => E.push({ text, title: 'edge: ' + title, meta: { src: 'edge', lang: 'mixed' } });
  const cp = (...c) => String.fromCodePoint(...c);
  // Unicode White_Space (25) and lookalikes that are not White_Space
  const ws = [0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
    0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000];
  const notws = [0x1c, 0x1d, 0x1e, 0x1f, 0x180e, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff];
  for (const c of ws.concat(notws)) {
    const w = cp(c);
    add(`whitespace U+${c.toString(16).toUpperCase().padStart(4, '0')}`,
      `a${w}b a${w}${w}b ${w}x${w} word${w}${w}${w}next${w} 1${w}2 .${w}, ${w}${w}${w}é${w}中${w}${w}\n` +
      `${w}${w} leading and trailing ${w}${w}${w}` + ` mix ${w} ${w}${w} ${w}\t${w}\n${w}end${w}`);
  }
  add('all whitespace kinds in a row', 'x' + ws.map((c) => cp(c)).join('') + 'y ' + ws.map((c) => cp(c) + cp(c) + 'z').join(' ') + ' ' + ws.map((c) => ' ' + cp(c)).join('') + 'q');
  add('CRLF lines', 'first line\r\nsecond line\r\n\r\nafter blank\r\n  indented\r\n\ttabbed\r\n\r\n\r\nlast\r\n');
  add('CR only', 'old\rmac\r\rline endings\r');
  add('tabs', 'a\tb\t\tc\t\t\td\n\tx\n\t\ty\t\n\t \t \tz\t\t\t');
  add('trailing spaces', 'trailing   \nspaces  \n  and  \n   \nmore    ');
  add('spaces before newline', 'a \nb  \n\nc   \n \n  \n   x');
  add('space runs', 'a  b   c    d     e      f' + ' '.repeat(40) + 'g ' + ' '.repeat(1000) + 'end');
  add('only newlines', '\n\n\n\n');
  add('empty document', '');
  add('whitespace-only document', '   \n\t  \r\n \u3000 ');
  add('single space', ' ');
  add('single letter', 'a');
  add('combining marks', 'e\u0301te\u0301 cafe\u0301 Ame\u0301lie n\u0303 a\u0308\u0304 \u0301start x\u0300\u0301\u0302\u0303\u0304 ' +
    'precomposed: été café Amélie ñ ǟ  \u0345\u0363 Z\u0351\u0300\u0345a\u0336\u0336l\u0327\u0327g\u0300o\u0489 ' +
    'क्षत्रिय हिन्दी नमस्ते ภาษาไทย น้ำ ที่ บ้าน العَرَبِيَّة مُحَمَّد עִבְרִית שָׁלוֹם ' +
    'Tiếng Việt ờ ự ẫ ' + 'e\u20dd \u20e3 1\ufe0f\u20e3');
  add('hangul jamo', '\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af \uac01 한글 \u1100\u1161 \u3131\u314f \u115f\u1160 ' +
    '한국어 텍스트와 \u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 (NFD)');
  add('emoji sequences', 'family 👨‍👩‍👧‍👦 couple 👩‍❤️‍👨 kiss 👩‍❤️‍💋‍👩 ' +
    'skin 👍🏻👍🏼👍🏽👍🏾👍🏿 👋🏽 wave 🧑🏿‍🚀 astronaut 👩🏾‍⚕️ ' +
    'flags 🇫🇷🇩🇪🇯🇵🇺🇸🇬🇧 🇺🇳 lone 🇦 x🇦🇧🇨y ' +
    'tags 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁷󠁬󠁳󠁿 keycaps #️⃣ *️⃣ 0️⃣ 1️⃣ 9️⃣ ' +
    'vs ☺︎ ☺️ ❤ ❤️ ✈️ ©️ ®️ ™️ ' +
    'rainbow 🏳️‍🌈 pirate 🏴‍☠️ ' + 'emoji😀without🎉spaces👍 ' + '🙂'.repeat(50) + ' end.');
  add('contractions', "don't DON'T Don't I'm I'M i'M we'll WE'LL We'Ll they've THEY'VE they're THEY'RE she'd SHE'D " +
    "it's IT'S It'S 's 'S 't 're 've 'm 'll 'd 'x ' '' ''s 's's rock'n'roll o'clock Jones' 'quoted' " +
    "don’t I’m it’s we’ll DON’T ‘single’ “double” ’s ‘s " + "don`t don´t donʼt " +
    "'ss 'lll 'dd 'mm 'tt 'ree 'vee x's x'S 1's .'s  's\n's\t's");
  add('digits and letters', 'abc123def 123abc abc123 a1b2c3 1,234,567.89 3.14e-10 -42 +7 0x1F 0b1010 1st 2nd 3rd 4th ' +
    '12½ ¼ ⅓ ²³ ¹ ₁₂ ١٢٣٤ ۱۲۳ १२३४ ๑๒๓ 一二三 ⅠⅡⅫ ⅻ 〇 𝟙𝟚𝟛 ①②③ ⑴ ㈠ 2024-01-01T12:34:56Z ' +
    'v1.2.3-rc.1 192.168.0.1 +1 (555) 123-4567 ' + '1234567890'.repeat(30) + ' x' + '9'.repeat(500));
  add('punctuation runs', '!!! ??? ... .... —– -- --- ----- ((())) [[{}]] <<>> """ \'\'\' ``` ~~~ @@ ## $$ %% ^^ && ** ' +
    '.,;:!? 。，、！？ ،؛؟ ।॥ …‥ ·•● ' + '-'.repeat(300) + ' ' + '=+'.repeat(200) + ' ' + '/*'.repeat(100) + '*/');
  add('very long words', 'a'.repeat(5000) + ' ' + 'ab'.repeat(3000) + ' Pneumonoultramicroscopicsilicovolcanoconiosis ' +
    'Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft ' +
    'x'.repeat(20000) + ' ' + 'é'.repeat(3000) + ' ' + '中'.repeat(5000) + ' ' + 'абв'.repeat(2000));
  {
    const r = rng(12345);
    let s = '';
    const alpha = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéèàüöäßçñ';
    for (let i = 0; i < 30000; i++) s += alpha[Math.floor(r() * alpha.length)];
    add('very long random word', s);
  }
  add('special token strings', 'foo<|endoftext|>bar <|endoftext|> x <|endoftext|><|endoftext|> <|endoftext| <|endoftext|>\n' +
    '<|endoftext|>' + ' text</s>more <s>start</s> <unk> <pad> < / s > </S> <|ENDOFTEXT|> <|endoftext|>end');
  add('endoftext alone', '<|endoftext|>');
  add('endoftext edges', ' <|endoftext|> ');
  add('added-token strings', 'Hi <|sep|> there [MASK]   word  <lstrip> x<rstrip>  y <sw> a<sw>b <sw>, sw <sw> sw<sw>\n' +
    '  <|sep|>  [MASK] [MASK][MASK] <lstrip><rstrip> <SW> <sw>\t<sw>\n<sw> <|sep|><|sep|><|sep|> x<|sep|><|sep|>y\n' +
    '<|sep|<|sep|> <|sep|><|sep|  [MASK]\n\n[MASK] \u3000<lstrip>\u3000 <rstrip>\n\nz <sw>.<sw>, é<sw> 中<sw>中 <sw>');
  add('controls', 'a\u0000b c\u0001d \u0007\u0008\u001b[31mred\u001b[0m \u007f \u0080\u0081\u009f \u00ad soft\u00adhyphen ' +
    'zw\u200bsp zw\u200cnj zw\u200dj \u2060wj \ufeffbom \u200e\u200f\u202a\u202b\u202c\u202d\u202e bidi');
  add('astral and odd code points', '𝕳𝖊𝖑𝖑𝖔 𝐀𝐁𝐂 𠀀𠀁 𪜀 𐌰𐌱𐌲 𓀀𓀁 𝄞 \ue000\uf8ff 􏿽 \ufffd \ufffc \uffff \ufffe ' +
    '\u0378 \u0870\u0871 ' + cp(0x10ffff) + cp(0xe0001) + cp(0xe0041));
  add('unicode 16 letters and digits', 'todhri ' + cp(0x105c0, 0x105c1, 0x105c2) + ' kirat ' + cp(0x16d43, 0x16d44, 0x16d70, 0x16d71) +
    ' olonal ' + cp(0x1e5d0, 0x1e5d1, 0x1e5f1, 0x1e5f2) + ' sunuwar ' + cp(0x11bc0, 0x11bc1, 0x11bf0, 0x11bf1) +
    ' garay ' + cp(0x10d50, 0x10d51, 0x10d70, 0x10d40, 0x10d41) + ' cjk-j ' + cp(0x31350, 0x2ebf0) + ' legacy ' + cp(0x1cc00, 0x1cc01) +
    ' x' + cp(0x105c0) + '1' + cp(0x11bf0) + 'y ' + ' ' + cp(0x16d43) + cp(0x16d43) + '!');
  add('mixed scripts no spaces', 'Hello世界Привет🌍مرحباשלוםनमस्ते你好こんにちは안녕하세요สวัสดีΓειά123abc!?');
  add('greek and cyrillic case', 'ΑΒΓ αβγ ΣΊΣΥΦΟΣ σίσυφος ς Ѐ ѐ Ӂ ӂ İ ı ǅ ǈ ǋ ᾈ ᾼ ꙮ');
  add('html and code', '<div class="x">Hello&nbsp;world</div>\n<script>if (a && b) { x = y[0]; }</script>\n' +
    'int main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}\n    def f(x):\n        return x ** 2  # comment\n' +
    'https://example.com/path?q=1&r=two#frag user@example.org C:\\Windows\\System32');
  // One ~1 MB document on a single line.
  {
    const parts = ['The quick brown fox jumps over the lazy dog.', 'Le cœur déçu mais l’âme plutôt naïve.',
      'Съешь же ещё этих мягких французских булок.', '日本語の文章です。', '我能吞下玻璃而不伤身体。', '😀👍🏽', '12,345.67'];
    let s = '', i = 0;
    while (s.length < 1000000) s += parts[i++ % parts.length] + ' ';
    add('one megabyte line', s);
  }
  return E;
}

// ---- output ----------------------------------------------------------------------------------
// Python json.dumps(ensure_ascii=True) style: ", " / ": " separators, non-ASCII and DEL as \uXXXX.
function pyJSON(v) {
  if (typeof v === 'string') return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  if (v && typeof v === 'object') return '{' + Object.keys(v).map((k) => pyJSON(k) + ': ' + pyJSON(v[k])).join(', ') + '}';
  return JSON.stringify(v);
}
function line(d, style) {
  if (style === 'bench') return JSON.stringify({ text: d.text });
  if (style === 0) return JSON.stringify({ text: d.text, title: d.title, meta: d.meta });
  if (style === 1) return pyJSON({ title: d.title, text: d.text, meta: d.meta });
  return JSON.stringify({ meta: d.meta, text: d.text, title: d.title });
}

(async () => {
  const r = rng(20240601);
  let docs = [];
  if (BENCH) {
    const owt = fs.readFileSync(process.env.OWT, 'utf8').split('\n').filter((l) => l.trim()).map((l) => ({ text: JSON.parse(l).text }));
    for (let k = 0; k < 6; k++) docs.push(...owt);
    log(`openwebtext: ${owt.length} docs x 6`);
    let files = [];
    for (const p of process.env.BENCH_MAN_PKGS.split(/\s+/).filter(Boolean)) files.push(...pkgFiles(p, /^\/usr\/share\/man\/man[0-9][^/]*\/[^/]+\.gz$/));
    files = byHash([...new Set(files)], (f) => f);
    docs.push(...await manDocs(files, 26e6, 'en', true));
    // vim's English help files, one document per section, reflowed like the man pages
    let vim = 0, nv = 0;
    for (const f of pkgFiles('vim-runtime', /^\/usr\/share\/vim\/vim[0-9]+\/doc\/[^/]+\.txt$/)) {
      for (const sec of fs.readFileSync(f, 'utf8').split(/\n={20,}\n/)) {
        const t = reflowText(sec, true);
        if (t.length < 300) continue;
        docs.push({ text: t }); vim += blen(t); nv++;
      }
    }
    log(`vim help: ${nv} sections, ${(vim / 1e6).toFixed(2)} MB`);
    shuffle(docs, r);
    const out = fs.openSync(OUT, 'w');
    let buf = [], total = 0;
    for (const d of docs) { const l = line(d, 'bench') + '\n'; buf.push(l); total += blen(d.text); if (buf.length >= 1000) { fs.writeSync(out, buf.join('')); buf = []; } }
    fs.writeSync(out, buf.join('')); fs.fsyncSync(out); fs.closeSync(out);
    log(`${docs.length} documents, ${(total / 1e6).toFixed(1)} MB of text`);
    return;
  }
  const catPkgs = process.env.CAT_PKGS.split(/\s+/).filter(Boolean);
  const catLangs = ['fr', 'de', 'es', 'it', 'pt_BR', 'pl', 'cs', 'ro', 'hu', 'fi', 'sv', 'nl', 'tr', 'vi', 'eo',
    'ru', 'uk', 'bg', 'sr', 'el', 'ka', 'hy', 'zh_CN', 'zh_TW', 'ja', 'ko', 'ar', 'fa', 'he', 'hi', 'bn', 'ta', 'th', 'am', 'km'];
  for (const lang of catLangs) docs.push(...catalogDocs(lang, catPkgs, 280e3, r));
  const manSets = [['fr', 'manpages-fr', /^\/usr\/share\/man\/fr\//], ['de', 'manpages-de', /^\/usr\/share\/man\/de\//],
    ['es', 'manpages-es', /^\/usr\/share\/man\/es\//], ['ru', 'manpages-ru', /^\/usr\/share\/man\/ru\//],
    ['ja', 'manpages-ja', /^\/usr\/share\/man\/ja\//], ['zh_CN', 'manpages-zh', /^\/usr\/share\/man\/zh_CN\//],
    ['zh_TW', 'manpages-zh', /^\/usr\/share\/man\/zh_TW\//]];
  for (const [lang, pkg, re] of manSets) {
    const files = byHash(pkgFiles(pkg, /\.gz$/).filter((f) => re.test(f)), (f) => f);
    docs.push(...await manDocs(files, lang === 'zh_TW' ? 300e3 : 600e3, lang, false));
  }
  {
    let files = [];
    for (const p of ['manpages', 'manpages-dev']) files.push(...pkgFiles(p, /^\/usr\/share\/man\/man[0-9][^/]*\/[^/]+\.gz$/));
    docs.push(...await manDocs(byHash(files, (f) => f), 1.5e6, 'en', false));
  }
  docs.push(...emojiDocs(r));
  shuffle(docs, r);
  const edge = edgeDocs();
  // each edge case twice: compact raw UTF-8 and Python-style escaped, at fixed pseudo-random places
  const styled = docs.map((d) => [d, r() < 0.6 ? 0 : r() < 0.5 ? 1 : 2]);
  for (const d of edge) for (const st of [0, 1]) styled.splice(Math.floor(r() * (styled.length + 1)), 0, [d, st]);
  const out = fs.openSync(OUT, 'w');
  let buf = [], total = 0;
  for (const [d, st] of styled) {
    buf.push(line(d, st) + '\n'); total += blen(d.text);
    if (buf.length >= 500) { fs.writeSync(out, buf.join('')); buf = []; }
  }
  fs.writeSync(out, buf.join('')); fs.fsyncSync(out); fs.closeSync(out);
  log(`${styled.length} documents (${edge.length} edge cases x2), ${(total / 1e6).toFixed(1)} MB of text`);
})().catch((e) => { console.error('corpus:', e); process.exit(3); });
EOF
sync -f "$tmp" 2>/dev/null
mv -f "$tmp" "$out" || exit 3
echo "$stamp" >"$out.stamp"
echo "$ME: wrote $out ($(du -h "$out" | cut -f1), $(wc -l <"$out") lines) in $((SECONDS - start)) s" >&2
