#!/usr/bin/env node
// Trains BERT-style WordPiece fixtures with Hugging Face tokenizers' own WordPiece trainer (the npm
// binding in tests/node) and checks that HF loads and runs each of them.
//
//   node tests/ref/train-wordpiece.js CORPUS OUTDIR
//
// CORPUS: JSON lines with "text" (*.jsonl) or plain text.  Writes, for NAME in uncased and cased,
// OUTDIR/NAME/vocab.txt (a token per line, id = line number, as BERT's vocab.txt) and
// OUTDIR/NAME/tokenizer.json (the same vocabulary, as BertTokenizerFast saves it):
//   uncased  BertNormalizer(clean_text, handle_chinese_chars, lowercase, strip_accents null = as
//            lowercase); BertPreTokenizer; WordPiece(unk [UNK], prefix ##, 100 characters);
//            [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4, special added tokens, normalized false);
//            post_processor BertProcessing; decoder WordPiece.
//   cased    the same with lowercase and strip_accents false.
//   uncased-added  uncased plus added tokens (ids after the vocab), through the API as users do:
//            "<Extra>"  non-special, normalized true: HF matches its normalized form "<extra>" in
//                       the normalized text, so "<EXTRA>" in a document is it too;
//            "Zz-Top"   non-special, normalized false: matched in the raw text only.
//
// How: the binding has no trainer constructors, so Tokenizer.train(files) uses the model's default
// trainer, WordPieceTrainer::default() (vocab_size 30000, min_frequency 0, no special tokens, the
// whole alphabet, prefix ##), under the normalizer and pre-tokenizer of the tokenizer being
// trained.  The special tokens are put first afterwards, the trained tokens keeping their order.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ME = 'train-wordpiece';
const die = (code, msg) => { process.stderr.write(`${ME}: ${msg}\n`); process.exit(code); };
let tk;
try {
  tk = require(path.join(process.env.LMTK_NODE_MODULES || path.join(__dirname, '..', 'node', 'node_modules'), 'tokenizers'));
} catch (e) {
  die(3, `cannot load the npm package tokenizers (run: npm ci --prefix tests/node): ${e.message}`);
}
const args = process.argv.slice(2);
if (args.length !== 2) die(2, 'usage: train-wordpiece.js CORPUS OUTDIR');
const [corpus, outdir] = args;
const SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

const normalizer = (lower) => ({
  type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: lower,
});
const base = (lower, vocab, added) => ({
  version: '1.0', truncation: null, padding: null, added_tokens: added,
  normalizer: lower ? normalizer(true) : { ...normalizer(false), strip_accents: false },
  pre_tokenizer: { type: 'BertPreTokenizer' },
  post_processor: { type: 'BertProcessing', sep: ['[SEP]', 3], cls: ['[CLS]', 2] },
  decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
});
// JSON text of a tokenizer, with the vocab written in id order (JS objects would put integer-like
// keys such as "10" first).
function tokenizerJSON(j, vocab) {
  const s = JSON.stringify({ ...j, model: { ...j.model, vocab: '@VOCAB@' } }, null, 2);
  const v = '{\n' + vocab.map((k, id) => `      ${JSON.stringify(k)}: ${id}`).join(',\n') + '\n    }';
  return s.replace('"@VOCAB@"', () => v);
}
function writeAtomic(f, text) {
  fs.mkdirSync(path.dirname(f), { recursive: true });
  fs.writeFileSync(f + '.tmp', text);
  fs.renameSync(f + '.tmp', f);
}

const t0 = Date.now();
let trainFile = corpus, tmpText = null;
let text;
try { text = fs.readFileSync(corpus, 'utf8'); } catch (e) { die(3, `cannot read ${corpus}: ${e.message}`); }
if (/\.jsonl$/.test(corpus)) {
  text = text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text).join('\n') + '\n';
  tmpText = trainFile = path.join(os.tmpdir(), `train-wordpiece.${process.pid}.txt`);
  fs.writeFileSync(tmpText, text);
}
const out = {};
try {
  for (const [name, lower] of [['uncased', true], ['cased', false]]) {
    const t = tk.Tokenizer.fromString(JSON.stringify(base(lower, {}, [])));
    t.train([trainFile]);
    const tmp = path.join(os.tmpdir(), `train-wordpiece.${process.pid}.json`);
    t.save(tmp, false);
    const r = JSON.parse(fs.readFileSync(tmp, 'utf8'));
    fs.unlinkSync(tmp);
    const trained = Object.entries(r.model.vocab).sort((a, b) => a[1] - b[1]).map((e) => e[0]);
    const vocab = [...SPECIALS, ...trained.filter((k) => !SPECIALS.includes(k))];
    if (vocab.some((k) => /[\n\r]/.test(k) || k !== k.trimEnd())) die(1, `${name}: a token vocab.txt cannot hold`);
    const added = SPECIALS.map((c, id) => ({ id, content: c, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
    const dir = path.join(outdir, name);
    writeAtomic(path.join(dir, 'vocab.txt'), vocab.join('\n') + '\n');
    out[name] = path.join(dir, 'tokenizer.json');
    writeAtomic(out[name], tokenizerJSON(base(lower, null, added), vocab) + '\n');
    if (lower) {
      const ta = tk.Tokenizer.fromFile(out[name]);
      ta.addAddedTokens([new tk.AddedToken('<Extra>', false, { normalized: true }),
        new tk.AddedToken('Zz-Top', false, { normalized: false })]);
      ta.save(tmp, false);
      const ja = JSON.parse(fs.readFileSync(tmp, 'utf8'));
      fs.unlinkSync(tmp);
      out['uncased-added'] = path.join(outdir, 'uncased-added', 'tokenizer.json');
      writeAtomic(out['uncased-added'], tokenizerJSON({ ...ja, model: { ...ja.model } }, vocab) + '\n');
    }
  }
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
  expect('specials', SPECIALS.map((s) => T.uncased.tokenToId(s)), [0, 1, 2, 3, 4]);
  expect('uncased lowercases', await enc(T.uncased, 'THE'), await enc(T.uncased, 'the'));
  expect('cased keeps case', (await enc(T.cased, 'THE')).join('') === (await enc(T.cased, 'the')).join(''), false);
  expect('[SEP] is special', await enc(T.uncased, 'a [SEP] b'), ['a', '[SEP]', 'b']);
  const ta = T['uncased-added'], V = ta.getVocabSize(false);
  expect('added ids', ['<Extra>', 'Zz-Top'].map((s) => ta.tokenToId(s)), [V, V + 1]);
  const ids = async (t, s) => (await t.encode(s, null, o)).getIds();
  expect('normalized added token', await ids(ta, 'x <EXTRA> y <Éxtra>'), [...await ids(ta, 'x'), V, ...await ids(ta, 'y'), V]);
  expect('raw added token', (await enc(ta, 'x Zz-Top y ZZ-TOP')).filter((s) => s === 'Zz-Top').length, 1);
  for (const [k, t] of Object.entries(T)) {
    process.stderr.write(`${ME}: ${out[k]}: ${t.getVocabSize(false)} vocab, ${t.getVocabSize(true)} with added tokens\n`);
  }
  process.stderr.write(`${ME}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
})().catch((e) => die(3, e.stack || String(e)));
