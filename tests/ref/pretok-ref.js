#!/usr/bin/env node
/* pretok-ref.js - the reference pre-tokenizers (Hugging Face tokenizers, npm "tokenizers"), for
 * tests/unit/tokenize_pretok.c to compare against.
 *
 *   node pretok-ref.js check                         exit 0 if the package loads
 *   node pretok-ref.js gpt2  < strings.jsonl         ByteLevel(add_prefix_space=false, use_regex)
 *   node pretok-ref.js bloom < strings.jsonl         BLOOM's Split + ByteLevel(use_regex=false)
 *   node pretok-ref.js split PATTERN BEHAVIOR INVERT [regex|string] < strings.jsonl
 *   node pretok-ref.js splits CONFIGS.json < strings.jsonl
 *   node pretok-ref.js classes                       per-property code point ranges
 *
 * Input: one JSON string per line.  Output: one line per input line, the pieces as
 * "byte_offset,byte_length" pairs separated by spaces (the reference reports offsets in code
 * points; they are converted here so that C can compare bytes).  "splits" runs each Split of a
 * JSON array [{pattern, behavior, invert, string}] over all the strings in turn, one node start
 * for all of them, and prints the blocks one after the other.  "classes" prints, for each
 * probe, "NAME" and the hex ranges of the code points the reference's regex engine puts in it.
 *
 * The package is found through NODE_PATH (the C test points it at tests/node/node_modules, or at
 * $LMTK_NODE_MODULES).  Pre-tokenizers with a Regex pattern are only reachable through a
 * tokenizer.json: the binding's splitPreTokenizer() takes its pattern as a String. */
'use strict';
let tk;
try {
	tk = require('tokenizers');
} catch (e) {
	console.error('pretok-ref.js: cannot load the tokenizers package: ' + e.message);
	process.exit(3);
}
const fs = require('fs');

const BLOOM = ' ?[^(\\s|[.,!?…。，、।۔،])]+';

function preTokenizer(pt) {
	const json = {
		version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
		pre_tokenizer: pt, post_processor: null, decoder: null,
		model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
			end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: []},
	};
	return tk.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
}

/* code point index -> byte offset, for one string */
function byteOffsets(s) {
	const offs = [0];
	let b = 0;
	for (const ch of s) {
		const c = ch.codePointAt(0);
		b += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
		offs.push(b);
	}
	return offs;
}

function readStrings() {
	const lines = fs.readFileSync(0, 'utf8').split('\n');
	if (lines[lines.length - 1] === '')
		lines.pop();
	return lines.map(line => JSON.parse(line));
}

function runLines(pts) {
	const strings = readStrings(), offs = strings.map(byteOffsets), out = [];
	for (const pt of pts)
		strings.forEach((s, i) => {
			const o = offs[i];
			const pieces = pt.preTokenizeString(s);
			out.push(pieces.map(([, [a, b]]) => `${o[a]},${o[b] - o[a]}`).join(' '));
		});
	process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

function split(pattern, behavior, invert, string) {
	return preTokenizer({type: 'Split', pattern: string ? {String: pattern} : {Regex: pattern},
		behavior, invert});
}

/* Every code point but the surrogates, in order, as one string; runs of the property come back
 * as pieces of Split(Regex "X+", Removed, invert) (the matches are kept, the gaps dropped). */
function classes() {
	const cps = [];
	for (let c = 0; c < 0x110000; c++)
		if (c < 0xD800 || c > 0xDFFF)
			cps.push(String.fromCodePoint(c));
	const all = cps.join('');
	const cpAt = i => (i < 0xD800 ? i : i + 0x800);
	const probes = {
		L: '\\p{L}+', N: '\\p{N}+', S: '\\s+', BLOOM_EXCL: '[(\\s|[.,!?…。，、।۔،])]+',
		w: '\\w+', d: '\\d+', h: '\\h+', P: '\\p{P}+', M: '\\p{M}+', S_sym: '\\p{S}+',
		Lu: '\\p{Lu}+', Nd: '\\p{Nd}+', Mn: '\\p{Mn}+',
		alpha: '[[:alpha:]]+', punct: '[[:punct:]]+', Word: '\\p{Word}+',
	};
	for (const [name, re] of Object.entries(probes)) {
		const pt = preTokenizer({type: 'Split', pattern: {Regex: re}, behavior: 'Removed', invert: true});
		const ranges = pt.preTokenizeString(all).map(([, [a, b]]) =>
			`${cpAt(a).toString(16)}-${cpAt(b - 1).toString(16)}`);
		console.log(name + ' ' + ranges.join(' '));
	}
}

const [mode, ...args] = process.argv.slice(2);
switch (mode) {
case 'check':
	break;
case 'gpt2':
	runLines([tk.byteLevelPreTokenizer(false, true)]);
	break;
case 'bloom':
	runLines([preTokenizer({type: 'Sequence', pretokenizers: [
		{type: 'Split', pattern: {Regex: BLOOM}, behavior: 'Isolated', invert: false},
		{type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false}]})]);
	break;
case 'split': {
	const [pattern, behavior, invert, kind] = args;
	runLines([split(pattern, behavior, invert === 'true' || invert === '1', kind === 'string')]);
	break;
}
case 'splits':
	runLines(JSON.parse(fs.readFileSync(args[0], 'utf8')).map(c =>
		split(c.pattern, c.behavior, !!c.invert, !!c.string)));
	break;
case 'classes':
	classes();
	break;
default:
	console.error('usage: pretok-ref.js check|gpt2|bloom|split PATTERN BEHAVIOR INVERT [regex|string]|splits CONFIGS|classes');
	process.exit(2);
}
