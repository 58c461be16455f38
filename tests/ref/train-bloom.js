#!/usr/bin/env node
// Trains small tokenizer.json fixtures with Hugging Face tokenizers' own BPE trainer (the npm
// binding in tests/node) and checks that HF loads and runs each of them.
//
//   node tests/ref/train-bloom.js CORPUS OUTDIR [--vocab-size N]      (N default 8000)
//
// CORPUS: JSON lines with "text" (*.jsonl) or plain text.  Writes OUTDIR/NAME/tokenizer.json:
//   bloom          BLOOM's layout: normalizer null; pre_tokenizer Sequence[Split(Regex
//                  " ?[^(\s|[.,!?…。，、।۔،])]+", Isolated), ByteLevel(add_prefix_space=false,
//                  use_regex=false)]; BPE (no unk) with <unk> 0, <s> 1, </s> 2, <pad> 3 (special
//                  added tokens), the 256 byte-level characters, then the merges; post_processor and
//                  decoder ByteLevel.  EOD = </s>.
//   bloom-added    bloom plus added tokens (ids after the vocab):
//                    "<|sep|>"        special
//                    "[MASK]"         non-special, normalized:false, lstrip
//                    "<lstrip>"       special, lstrip and rstrip
//                    "<rstrip>"       non-special, normalized:true, rstrip
//                    "<sw>"           non-special, normalized:true, single_word
//                    "<|sep|><|sep|>" non-special, normalized:false (leftmost-longest vs "<|sep|>")
//   byte-fallback  no ByteLevel: pre_tokenizer Split(String " ", Isolated); BPE with unk_token
//                  <unk>, byte_fallback true, fuse_unk true; vocab <unk> <s> </s> <pad>, <0x00>..<0xFF>
//                  (ids 4..259), the 1000 most frequent characters of CORPUS, then the merges;
//                  decoder Sequence[ByteFallback, Fuse].  Characters outside the vocab become
//                  <0xNN> byte tokens.
//   unk            byte-fallback without the <0xNN> tokens and with byte_fallback false: characters
//                  outside the vocab become <unk>, consecutive ones fused (fuse_unk true).
//
// How (API quirks of the tokenizers 0.23 Node binding):
//  - It has no trainer constructors (no bpeTrainer): Tokenizer.train(files) always uses the model's
//    default trainer, BpeTrainer::default() = vocab_size 30000, min_frequency 0, no special tokens,
//    no initial alphabet.  So we train that, then cut it down to N the way
//    BpeTrainer{vocab_size: N, special_tokens: [<unk>,<s>,</s>,<pad>], initial_alphabet: ...} would:
//    specials first, the alphabet sorted by code point, then the merges in the trained order, each
//    adding its result token unless already present, stopping when the vocab has N tokens.  The
//    trainer's merge order depends only on pair counts and, for ties, on the relative order of token
//    ids, which this renumbering preserves, so the merges are exactly the trainer's.
//  - splitPreTokenizer(pattern, behavior) always makes a String pattern; the Regex one is made by
//    editing the saved JSON ({"String": p} -> {"Regex": p}) and Tokenizer.fromString.
//  - Tokenizer.save() writes merges as [a, b] pairs (not "a b" strings).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ME = 'train-bloom';
const die = (code, msg) => { process.stderr.write(`${ME}: ${msg}\n`); process.exit(code); };
let tk;
try {
  tk = require(path.join(process.env.LMTK_NODE_MODULES || path.join(__dirname, '..', 'node', 'node_modules'), 'tokenizers'));
} catch (e) {
  die(3, `cannot load the npm package tokenizers (run: npm ci --prefix tests/node): ${e.message}`);
}

const args = process.argv.slice(2);
let vocabSize = 8000;
{
  const i = args.indexOf('--vocab-size');
  if (i >= 0) { vocabSize = Number(args[i + 1]); args.splice(i, 2); }
}
if (args.length !== 2 || !(vocabSize >= 300)) die(2, 'usage: train-bloom.js CORPUS OUTDIR [--vocab-size N]');
const [corpus, outdir] = args;
const SPECIALS = ['<unk>', '<s>', '</s>', '<pad>'];
const BLOOM_RE = ' ?[^(\\s|[.,!?…。，、।۔،])]+';

// ---- helpers ---------------------------------------------------------------------------------
// JSON text of a tokenizer, with the vocab written in id order (JS objects would put integer-like
// keys such as "10" first).
function tokenizerJSON(j) {
  const vocab = j.model.vocab;
  const model = { ...j.model, vocab: '@VOCAB@' };
  const s = JSON.stringify({ ...j, model }, null, 2);
  const v = '{\n' + vocab.map(([k, id]) => `      ${JSON.stringify(k)}: ${id}`).join(',\n') + '\n    }';
  return s.replace('"@VOCAB@"', () => v);
}
function write(name, j) {
  const dir = path.join(outdir, name);
  fs.mkdirSync(dir, { recursive: true });
  const f = path.join(dir, 'tokenizer.json');
  fs.writeFileSync(f + '.tmp', tokenizerJSON(j) + '\n');
  fs.renameSync(f + '.tmp', f);
  return f;
}
const added = (id, content, o = {}) => ({
  id, content, single_word: !!o.single_word, lstrip: !!o.lstrip, rstrip: !!o.rstrip,
  normalized: o.normalized === undefined ? !o.special : o.normalized, special: !!o.special,
});
// Trains with the default BpeTrainer; returns {alphabet: [chars sorted by code point], merges: [[a,b]...]}
function train(preTokenizerJSON, file) {
  const t = new tk.Tokenizer(tk.BPE.empty());
  const tmp = path.join(os.tmpdir(), `train-bloom.${process.pid}.json`);
  t.save(tmp, false);
  const j = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.unlinkSync(tmp);
  j.pre_tokenizer = preTokenizerJSON;
  const t2 = tk.Tokenizer.fromString(JSON.stringify(j));
  t2.train([file]);
  t2.save(tmp, false);
  const r = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.unlinkSync(tmp);
  const merges = r.model.merges.map((m) => (Array.isArray(m) ? m : m.split(' ')));
  const inMerges = new Set(merges.map((m) => m[0] + m[1]));
  const alphabet = Object.keys(r.model.vocab).filter((k) => !inMerges.has(k)).sort(cpCompare);
  return { alphabet, merges, vocab: r.model.vocab };
}
function cpCompare(a, b) { return a.codePointAt(0) - b.codePointAt(0); }
// vocab = head tokens, then merges in order while they apply and the vocab is below `size`
function cut(head, merges, size) {
  const v = new Map();
  for (const t of head) if (!v.has(t)) v.set(t, v.size);
  const kept = [];
  for (const [a, b] of merges) {
    if (v.size >= size) break;
    if (!v.has(a) || !v.has(b)) continue;
    if (!v.has(a + b)) v.set(a + b, v.size);
    kept.push([a, b]);
  }
  return { vocab: [...v], merges: kept };
}
function byteLevelAlphabet() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [], set = new Set(bs);
  let n = 0;
  for (let b = 0; b < 256; b++) cs.push(String.fromCodePoint(set.has(b) ? b : 256 + n++));
  return cs.sort(cpCompare);
}
const bpeModel = (vocab, merges, o = {}) => ({
  type: 'BPE', dropout: null, unk_token: o.unk || null, continuing_subword_prefix: null, end_of_word_suffix: null,
  fuse_unk: !!o.fuse_unk, byte_fallback: !!o.byte_fallback, ignore_merges: false, vocab, merges,
});
const base = (o) => ({
  version: '1.0', truncation: null, padding: null, added_tokens: o.added_tokens, normalizer: null,
  pre_tokenizer: o.pre_tokenizer, post_processor: o.post_processor || null, decoder: o.decoder, model: o.model,
});

// ---- main ------------------------------------------------------------------------------------
const t0 = Date.now();
let trainFile = corpus, tmpText = null;
let text;
try { text = fs.readFileSync(corpus, 'utf8'); } catch (e) { die(3, `cannot read ${corpus}: ${e.message}`); }
if (/\.jsonl$/.test(corpus)) {
  text = text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text).join('\n') + '\n';
  tmpText = trainFile = path.join(os.tmpdir(), `train-bloom.${process.pid}.txt`);
  fs.writeFileSync(tmpText, text);
}
const out = {};
try {
  // bloom
  const bloomPre = {
    type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: BLOOM_RE }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }],
  };
  const tb = train(bloomPre, trainFile);
  const bl = cut([...SPECIALS, ...byteLevelAlphabet()], tb.merges, vocabSize);
  const byteLevel = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  const bloom = base({
    added_tokens: SPECIALS.map((s, i) => added(i, s, { special: true })),
    pre_tokenizer: bloomPre,
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: byteLevel, model: bpeModel(bl.vocab, bl.merges),
  });
  out.bloom = write('bloom', bloom);

  // bloom-added: the extra tokens are added through the API, as users do
  {
    const t = tk.Tokenizer.fromFile(out.bloom);
    const A = (c, special, o) => new tk.AddedToken(c, special, o);
    t.addAddedTokens([
      A('<|sep|>', true),
      A('[MASK]', false, { normalized: false, leftStrip: true }),
      A('<lstrip>', true, { leftStrip: true, rightStrip: true }),
      A('<rstrip>', false, { normalized: true, rightStrip: true }),
      A('<sw>', false, { normalized: true, singleWord: true }),
      A('<|sep|><|sep|>', false, { normalized: false }),
    ]);
    const tmp = path.join(os.tmpdir(), `train-bloom.${process.pid}.added.json`);
    t.save(tmp, false);
    const j = JSON.parse(fs.readFileSync(tmp, 'utf8'));
    fs.unlinkSync(tmp);
    j.model.vocab = bl.vocab; // same model; keep the id-ordered vocab
    out['bloom-added'] = write('bloom-added', j);
  }

  // byte-fallback and unk: Split(String " ", Isolated), no ByteLevel
  const splitPre = { type: 'Split', pattern: { String: ' ' }, behavior: 'Isolated', invert: false };
  const tf = train(splitPre, trainFile);
  const freq = new Map();
  for (const ch of text) freq.set(ch, (freq.get(ch) || 0) + 1);
  const top = [...freq].sort((a, b) => b[1] - a[1] || cpCompare(a[0], b[0])).slice(0, 1000).map((e) => e[0]).sort(cpCompare);
  const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const fb = cut([...SPECIALS, ...bytes, ...top], tf.merges, vocabSize);
  out['byte-fallback'] = write('byte-fallback', base({
    added_tokens: SPECIALS.map((s, i) => added(i, s, { special: true })),
    pre_tokenizer: splitPre,
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }] },
    model: bpeModel(fb.vocab, fb.merges, { unk: '<unk>', fuse_unk: true, byte_fallback: true }),
  }));
  const uk = cut([...SPECIALS, ...top], tf.merges, vocabSize);
  out.unk = write('unk', base({
    added_tokens: SPECIALS.map((s, i) => added(i, s, { special: true })),
    pre_tokenizer: splitPre,
    decoder: { type: 'Fuse' },
    model: bpeModel(uk.vocab, uk.merges, { unk: '<unk>', fuse_unk: true, byte_fallback: false }),
  }));
} finally {
  if (tmpText) fs.unlinkSync(tmpText);
}

// ---- checks: HF loads each file and behaves as described -------------------------------------
(async () => {
  const o = { addSpecialTokens: false };
  const enc = async (t, s) => (await t.encode(s, null, o)).getTokens();
  const expect = (name, got, want) => {
    if (JSON.stringify(got) !== JSON.stringify(want)) die(1, `${name}: got ${JSON.stringify(got)}, wanted ${JSON.stringify(want)}`);
  };
  const T = {};
  for (const [k, f] of Object.entries(out)) T[k] = tk.Tokenizer.fromFile(f);
  expect('bloom pre-tokenizer', T.bloom.getPreTokenizer().preTokenizeString('Hello, world! (test) a|b').map((p) => p[0]),
    ['Hello', ',', 'Ġworld', '!Ġ(', 'test', ')', 'Ġa', '|', 'b']);
  expect('bloom specials', [0, 1, 2, 3].map((i) => T.bloom.idToToken(i)), SPECIALS);
  expect('bloom </s>', await enc(T.bloom, 'a</s>'), ['a', '</s>']);
  const ta = T['bloom-added'];
  const V = ta.getVocabSize(false);
  expect('added ids', ['<|sep|>', '[MASK]', '<lstrip>', '<rstrip>', '<sw>', '<|sep|><|sep|>'].map((s) => ta.tokenToId(s)),
    [V, V + 1, V + 2, V + 3, V + 4, V + 5]);
  expect('added <|sep|><|sep|>', (await enc(ta, 'x<|sep|><|sep|><|sep|>')).slice(-2), ['<|sep|><|sep|>', '<|sep|>']);
  expect('added <sw> single_word', (await enc(ta, 'a<sw>b')).includes('<sw>'), false);
  expect('added <sw> alone', (await enc(ta, 'a <sw> b')).includes('<sw>'), true);
  const fbt = await enc(T['byte-fallback'], '\u{1F9A9}');
  expect('byte fallback', fbt, ['<0xF0>', '<0x9F>', '<0xA6>', '<0xA9>']);
  expect('unk fused', await enc(T.unk, '\u{1F9A9}\u{1F9A9}'), ['<unk>']);
  const docs = text.split('\n').slice(0, 20000);
  for (const [k, t] of Object.entries(T)) {
    const e = await t.encodeBatch(docs, o);
    const n = e.reduce((a, x) => a + x.getLength(), 0);
    const ids = JSON.parse(fs.readFileSync(out[k], 'utf8')).model.vocab;
    process.stderr.write(`${ME}: ${out[k]}: ${Object.keys(ids).length} vocab, ${t.getVocabSize(true)} with added tokens, ` +
      `${n} tokens for the first ${docs.length} lines\n`);
  }
  process.stderr.write(`${ME}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
})().catch((e) => die(3, e.stack || String(e)));
