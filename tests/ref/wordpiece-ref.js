#!/usr/bin/env node
/* wordpiece-ref.js - the reference BERT normalizer and pre-tokenizer (Hugging Face tokenizers,
 * npm "tokenizers"), for tests/unit/tokenize_wordpiece.c to compare against.
 *
 *   node wordpiece-ref.js check                      exit 0 if the package loads
 *   node wordpiece-ref.js classes                    one line per code point (surrogates excepted):
 *        CP<TAB>CLEAN<TAB>CJK<TAB>STRIP<TAB>LOWER<TAB>PRETOK
 *     CP hex; CLEAN, CJK, STRIP, LOWER: the code point alone through BertNormalizer with only
 *     clean_text, handle_chinese_chars, strip_accents, lowercase on, written as dot-separated
 *     hex code points ("" when it vanishes); PRETOK: BertPreTokenizer's pieces of "a" CP "b",
 *     each as dot-separated hex, separated by commas.
 *   node wordpiece-ref.js normalize < strings.jsonl  each JSON string through all 16 BertNormalizer
 *     configurations; one block per configuration (clean, chinese, strip, lower as bits 3..0 of
 *     its number, 0 to 15), one JSON string per input line.
 *
 * The package is found through NODE_PATH (the C test points it at tests/node/node_modules, or at
 * $LMTK_NODE_MODULES). */
'use strict';
let tk;
try {
	tk = require('tokenizers');
} catch (e) {
	console.error('wordpiece-ref.js: cannot load the tokenizers package: ' + e.message);
	process.exit(3);
}
const fs = require('fs');

const hex = (s) => [...s].map((c) => c.codePointAt(0).toString(16)).join('.');
const norm = (k) => tk.bertNormalizer({
	cleanText: !!(k & 8), handleChineseChars: !!(k & 4), stripAccents: !!(k & 2), lowercase: !!(k & 1),
});
const mode = process.argv[2];
if (mode === 'check') {
	process.exit(norm(15).normalizeString('A') === 'a' ? 0 : 1);
} else if (mode === 'classes') {
	const N = [norm(8), norm(4), norm(2), norm(1)];
	const P = tk.bertPreTokenizer();
	const out = [];
	for (let cp = 0; cp < 0x110000; cp++) {
		if (cp >= 0xd800 && cp < 0xe000)
			continue;
		const c = String.fromCodePoint(cp);
		const r = [cp.toString(16)];
		for (const n of N)
			r.push(hex(n.normalizeString(c)));
		r.push(P.preTokenizeString('a' + c + 'b').map((x) => hex(x[0])).join(','));
		out.push(r.join('\t'));
		if (out.length === 65536) {
			fs.writeSync(1, out.join('\n') + '\n');
			out.length = 0;
		}
	}
	fs.writeSync(1, out.join('\n') + '\n');
} else if (mode === 'normalize') {
	const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
	const out = [];
	for (let k = 0; k < 16; k++) {
		const n = norm(k);
		for (const s of lines)
			out.push(JSON.stringify(n.normalizeString(s)));
	}
	fs.writeSync(1, out.join('\n') + '\n');
} else {
	console.error('usage: wordpiece-ref.js check | classes | normalize < strings.jsonl');
	process.exit(2);
}
