#!/usr/bin/env node
// The reference encoder: token ids from Hugging Face tokenizers (the official Node binding,
// tests/node/node_modules/tokenizers), in exactly the format of `tokenize --format text`.
//
//   node tests/ref/hf-encode.js (--tokenizer tokenizer.json | --vocab vocab.json --merges merges.txt |
//        --bert-vocab vocab.txt (--lowercase | --cased)) [--json-keys K1 [K2 ...]] [--plain] [--append-eod]
//        < input > output
//
// Input: JSON lines (one document per line, its text under each key of --json-keys, default
// "text"), or with --plain one document per line (the line without its "\n"; a last line without
// "\n" counts, the "\n" ending the file does not start another document; "\r" is kept).
// Output: per document and key (in key order), one line: the ids separated by single spaces, then
// the EOD id if --append-eod and the text gave at least one token; an empty text gives an empty line.
// Encoding is tokenizer.encode(text) with addSpecialTokens=false (no post-processor tokens);
// added tokens (special or not) found in the text are matched as HF does.
//   --vocab/--merges: GPT-2's canonical tokenizer: no normalizer, ByteLevel(add_prefix_space=false,
//     use_regex=true) pre-tokenizer, BPE.fromFile(vocab, merges) (no unk, no dropout), and
//     "<|endoftext|>" added as a special token (its vocab id when the vocab has it); EOD = that id.
//     With --megatron it is not added (Megatron's GPT2BPETokenizer treats it as text).
//   --bert-vocab: BERT as Megatron's BertWordPieceLowerCase / BertWordPieceCase build it, in HF:
//     WordPiece.fromFile(vocab.txt) (unk [UNK], prefix ##, 100 characters a word), BertNormalizer
//     (clean_text, handle_chinese_chars, and strip_accents + lowercase with --lowercase only),
//     BertPreTokenizer; no added tokens (a literal "[SEP]" is text, as in Megatron).  EOD = [EOS],
//     whose id is the file's, or after the file's (and after [BOS]'s) when it lacks it, as Megatron.
//   --tokenizer: Tokenizer.fromFile; EOD = the special added token "</s>" if there is one, else
//     "<|endoftext|>"; --append-eod without either is an error.
// Bad input (a line that is not a JSON object, a missing or non-string key, invalid UTF-8, a lone
// surrogate escape) stops with exit 2 and the line number; a missing module or file exits 3.
// Batches of documents go through encodeBatch (all cores), output order is input order.
'use strict';
const fs = require('fs');
const path = require('path');

const ME = 'hf-encode';
const die = (code, msg) => { process.stderr.write(`${ME}: ${msg}\n`); process.exit(code); };
const usage = () => die(2, 'usage: hf-encode.js (--tokenizer tokenizer.json | --vocab vocab.json --merges merges.txt) ' +
  '[--json-keys K1 ...] [--plain] [--append-eod] [--megatron] < input > output');

let tk;
try {
  tk = require(path.join(process.env.LMTK_NODE_MODULES || path.join(__dirname, '..', 'node', 'node_modules'), 'tokenizers'));
} catch (e) {
  die(3, `cannot load the npm package tokenizers (run: npm ci --prefix tests/node): ${e.message}`);
}

const opt = { keys: [], plain: false, eod: false };
{
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const need = () => { if (i + 1 >= a.length) usage(); return a[++i]; };
    switch (a[i]) {
      case '--tokenizer': opt.tokenizer = need(); break;
      case '--vocab': opt.vocab = need(); break;
      case '--merges': opt.merges = need(); break;
      case '--bert-vocab': opt.bert = need(); break;
      case '--lowercase': opt.lower = true; break;
      case '--cased': opt.lower = false; break;
      case '--json-keys':
        while (i + 1 < a.length && !a[i + 1].startsWith('--')) opt.keys.push(a[++i]);
        if (!opt.keys.length) usage();
        break;
      case '--plain': opt.plain = true; break;
      case '--append-eod': opt.eod = true; break;
      case '--megatron': opt.megatron = true; break;
      default: usage();
    }
  }
  if ((!!opt.tokenizer) + (!!(opt.vocab || opt.merges)) + (!!opt.bert) !== 1) usage();
  if ((opt.vocab || opt.merges) && !(opt.vocab && opt.merges)) usage();
  if (!!opt.bert !== (opt.lower !== undefined)) usage();
  if (opt.plain && opt.keys.length) die(2, '--json-keys and --plain exclude each other');
  if (!opt.keys.length) opt.keys = ['text'];
  for (const f of [opt.tokenizer, opt.vocab, opt.merges, opt.bert]) {
    if (f !== undefined) { try { fs.accessSync(f, fs.constants.R_OK); } catch { die(3, `cannot read ${f}`); } }
  }
}

async function load() {
  let tok, eod = null;
  if (opt.tokenizer) {
    try { tok = tk.Tokenizer.fromFile(opt.tokenizer); } catch (e) { die(2, `${opt.tokenizer}: ${e.message}`); }
    const j = JSON.parse(fs.readFileSync(opt.tokenizer, 'utf8'));
    const special = new Map((j.added_tokens || []).filter((t) => t.special).map((t) => [t.content, t.id]));
    for (const name of ['</s>', '<|endoftext|>']) if (special.has(name)) { eod = special.get(name); break; }
    if (opt.eod && eod === null) die(2, `${opt.tokenizer}: --append-eod but no eos token ("</s>" or "<|endoftext|>") among its special tokens`);
  } else if (opt.bert) {
    let model;
    const o = { unkToken: '[UNK]', continuingSubwordPrefix: '##', maxInputCharsPerWord: 100 };
    try { model = await tk.WordPiece.fromFile(opt.bert, o); } catch (e) { die(2, `${opt.bert}: ${e.message}`); }
    tok = new tk.Tokenizer(model);
    tok.setNormalizer(tk.bertNormalizer({ cleanText: true, handleChineseChars: true, stripAccents: opt.lower, lowercase: opt.lower }));
    tok.setPreTokenizer(tk.bertPreTokenizer());
    const lines = fs.readFileSync(opt.bert, 'utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const v = new Map(lines.map((l, i) => [l.trimEnd(), i]));
    let next = lines.length;
    for (const t of ['[BOS]', '[EOS]']) if (!v.has(t)) v.set(t, next++);
    eod = v.get('[EOS]');
  } else {
    let model;
    try { model = await tk.BPE.fromFile(opt.vocab, opt.merges); } catch (e) { die(2, `${opt.vocab}, ${opt.merges}: ${e.message}`); }
    tok = new tk.Tokenizer(model);
    tok.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
    // --megatron: Megatron's GPT2BPETokenizer has no added tokens; a literal "<|endoftext|>" in
    // the text is BPE'd as text.  Its EOD is still the vocab's id for it.
    if (!opt.megatron) tok.addSpecialTokens(['<|endoftext|>']);
    eod = tok.tokenToId('<|endoftext|>');
  }
  return { tok, eod };
}

async function main() {
  const { tok, eod } = await load();
  const encOpt = { addSpecialTokens: false };
  const t0 = process.hrtime.bigint();
  const dec = new TextDecoder('utf-8', { fatal: true });
  let lineNo = 0, docs = 0, tokens = 0, bytes = 0;
  let texts = [], chars = 0;
  const out = process.stdout;

  // Up to INFLIGHT batches are encoding at once (each encodeBatch is an async task); they are
  // written out strictly in order.
  const INFLIGHT = 2;
  const queue = [];
  const drainOne = async () => {
    const encs = await queue.shift();
    let s = '';
    for (const e of encs) {
      const ids = e.getIds();
      tokens += ids.length;
      if (opt.eod && ids.length) ids.push(eod);
      s += ids.join(' ') + '\n';
    }
    if (!out.write(s)) await new Promise((res) => out.once('drain', res));
  };
  const flush = async (all) => {
    if (texts.length) queue.push(tok.encodeBatch(texts, encOpt));
    texts = []; chars = 0;
    while (queue.length >= (all ? 1 : INFLIGHT)) await drainOne();
  };
  const addDoc = async (line) => {
    lineNo++;
    if (opt.plain) {
      texts.push(line); chars += line.length;
    } else {
      let o;
      try { o = JSON.parse(line); } catch (e) { die(2, `line ${lineNo}: not JSON: ${e.message}`); }
      if (o === null || typeof o !== 'object' || Array.isArray(o)) die(2, `line ${lineNo}: not a JSON object`);
      for (const k of opt.keys) {
        const v = o[k];
        if (typeof v !== 'string') die(2, `line ${lineNo}: key "${k}" ${v === undefined ? 'missing' : 'is not a string'}`);
        if (/\p{Cs}/u.test(v)) die(2, `line ${lineNo}: key "${k}" has a lone surrogate`);
        texts.push(v); chars += v.length;
      }
    }
    docs++;
    if (chars >= (1 << 20) || texts.length >= 4096) await flush(false);
  };

  let pending = '';
  for await (const chunk of process.stdin) {
    bytes += chunk.length;
    let s;
    try { s = dec.decode(chunk, { stream: true }); } catch { die(2, `invalid UTF-8 in or after line ${lineNo + 1}`); }
    pending += s;
    let nl;
    let start = 0;
    while ((nl = pending.indexOf('\n', start)) >= 0) {
      await addDoc(pending.slice(start, nl));
      start = nl + 1;
    }
    pending = pending.slice(start);
  }
  try { pending += dec.decode(); } catch { die(2, `invalid UTF-8 at the end of the input`); }
  if (pending.length) await addDoc(pending);
  await flush(true);
  const sec = Number(process.hrtime.bigint() - t0) / 1e9;
  process.stderr.write(`${ME}: ${docs} documents, ${tokens} tokens, ${(bytes / 1e6).toFixed(1)} MB in ` +
    `${sec.toFixed(2)} s (${(bytes / 1e6 / sec).toFixed(1)} MB/s)\n`);
}

main().catch((e) => die(3, e && e.stack ? e.stack : String(e)));
