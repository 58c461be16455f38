#!/usr/bin/env node
/* gen_wordpiece.js - writes src/tokenize/wordpiece_tables.c: the Unicode data of BERT's
 * normalizer and pre-tokenizer as Hugging Face tokenizers has them.
 *
 *   mkdir -p /tmp/ucd && cd /tmp/ucd &&
 *     npm install @unicode/unicode-8.0.0@2.0.7 @unicode/unicode-9.0.0@2.0.7
 *   node src/tokenize/gen_wordpiece.js /tmp/ucd/node_modules > src/tokenize/wordpiece_tables.c
 *
 * HF's BertNormalizer and BertPreTokenizer do not ask one Unicode version their questions, they
 * ask three, through the Rust crates they use, and the reference is what they answer:
 *   - "is it a control" (Cc Cf Co), "is it a nonspacing mark" (Mn), "is it punctuation" (P*)
 *     come from the crate unicode_categories, whose tables are Unicode 8.0;
 *   - NFD and the canonical combining classes come from unicode-normalization-alignments, whose
 *     tables are Unicode 9.0: a code point assigned later neither decomposes nor reorders;
 *   - White_Space and lowercasing come from Rust's own char, which is recent Unicode; node's
 *     (ICU's) answers are the same for every code point today.
 * The categories are read from the @unicode/unicode-8.0.0 package (node-unicode, the UCD as code
 * point lists) and the 9.0 assignment from @unicode/unicode-9.0.0; the decompositions, the order
 * of the combining classes and the lowercase mappings from node itself (String.prototype.normalize
 * and toLowerCase).  tests/unit/tokenize_wordpiece.c compares every code point against the
 * reference (tests/ref/wordpiece-ref.js), so a drift in any of these is a failing test.
 *
 * Output, for wordpiece.c (see wordpiece.h):
 *   wpu_index/wpu_blocks   a flag byte per code point, two levels like unicode_tables.c;
 *   wpu_decomp             sorted (cp, offset, length) into wpu_decomp_cps: the full NFD of every
 *                          code point that has one, Hangul syllables excepted (computed);
 *   wpu_lower              likewise the lowercase mapping of every code point that has one;
 *   wpu_ccc                sorted (cp, rank) for every code point of nonzero combining class:
 *                          the rank orders the classes as the numbers do (node gives the order
 *                          through normalize, not the numbers), and ordering is all NFD uses.
 * The output is committed: building lmtk needs neither node nor the packages. */
'use strict';
const path = require('path');

const F = { DROP: 1, WS: 2, PUNCT: 4, MN: 8, DECOMP: 16, LOWER: 32, CCC: 64, CJK: 128 };
/* HF's is_chinese_char: the CJK ideograph blocks BERT pads with spaces */
const CJK = [[0x4E00, 0x9FFF], [0x3400, 0x4DBF], [0x20000, 0x2A6DF], [0x2A700, 0x2B73F],
	[0x2B740, 0x2B81F], [0x2B920, 0x2CEAF], [0xF900, 0xFAFF], [0x2F800, 0x2FA1F]];
const HANGUL_FIRST = 0xAC00, HANGUL_LAST = 0xD7A3;

async function load(root, ver, prop) {
	return (await import(path.join(root, '@unicode', ver, prop, 'code-points.mjs'))).default;
}
const hex = (cp) => '0x' + cp.toString(16).toUpperCase().padStart(4, '0');
const cps = (s) => [...s].map((c) => c.codePointAt(0));
const isSurrogate = (cp) => cp >= 0xD800 && cp <= 0xDFFF;

async function main() {
	let root = process.argv[2];
	if (!root) {
		console.error('usage: gen_wordpiece.js NODE_MODULES_DIR > wordpiece_tables.c');
		process.exit(2);
	}
	if (path.basename(root) === '@unicode')
		root = path.dirname(root);
	const pkg8 = require(path.join(root, '@unicode', 'unicode-8.0.0', 'package.json'));
	const pkg9 = require(path.join(root, '@unicode', 'unicode-9.0.0', 'package.json'));
	const gc8 = async (name) => new Set(await load(root, 'unicode-8.0.0', 'General_Category/' + name));
	const Cc = await gc8('Control'), Cf = await gc8('Format'), Co = await gc8('Private_Use');
	const Mn = await gc8('Nonspacing_Mark'), P = await gc8('Punctuation');
	const unassigned9 = new Set(await load(root, 'unicode-9.0.0', 'General_Category/Unassigned'));
	const assigned9 = (cp) => !unassigned9.has(cp) && !isSurrogate(cp);

	const t = new Uint8Array(0x110000);
	const decomp = [], lower = [], nonzero = [];
	for (let cp = 0; cp < 0x110000; cp++) {
		if (isSurrogate(cp))
			continue;
		const c = String.fromCodePoint(cp);
		let f = 0;
		const tnr = cp === 9 || cp === 10 || cp === 13;
		if (cp === 0 || cp === 0xFFFD || (!tnr && (Cc.has(cp) || Cf.has(cp) || Co.has(cp))))
			f |= F.DROP;
		if (/\p{White_Space}/u.test(c))
			f |= F.WS;
		if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
		    (cp >= 123 && cp <= 126) || P.has(cp))
			f |= F.PUNCT;
		if (Mn.has(cp))
			f |= F.MN;
		if (CJK.some(([a, b]) => cp >= a && cp <= b))
			f |= F.CJK;
		if (assigned9(cp)) {
			const d = c.normalize('NFD');
			if (d !== c) {
				f |= F.DECOMP;
				if (cp < HANGUL_FIRST || cp > HANGUL_LAST)
					decomp.push([cp, cps(d)]);
			} else if ((c + '\u0334').normalize('NFD') !== c + '\u0334' ||
				   ('\u0301' + c).normalize('NFD') !== '\u0301' + c) {
				/* it moves past U+0334 (class 1) or U+0301 (230) moves past it: class != 0 */
				f |= F.CCC;
				nonzero.push(cp);
			}
		}
		const l = c.toLowerCase();
		if (l !== c) {
			f |= F.LOWER;
			lower.push([cp, cps(l)]);
		}
		t[cp] = f;
	}
	if (decomp.some(([, d]) => d.length > 4) || lower.some(([, l]) => l.length > 3))
		throw new Error('a mapping longer than wordpiece.h allows (NFD 4, lowercase 3)');
	/* every code point a decomposition yields is itself stable and known to the class table */
	const inCcc = new Set(nonzero);
	for (const [cp, d] of decomp)
		for (const x of d) {
			const c = String.fromCodePoint(x);
			if (c.normalize('NFD') !== c)
				throw new Error(`NFD of ${hex(cp)} yields unstable ${hex(x)}`);
			if (!assigned9(x))
				throw new Error(`NFD of ${hex(cp)} yields ${hex(x)}, not assigned in 9.0`);
			if (!inCcc.has(x) && ((c + '\u0334').normalize('NFD') !== c + '\u0334'))
				throw new Error(`NFD of ${hex(cp)} yields ${hex(x)} of unknown class`);
		}

	/* the classes' order: x after y in NFD's output when class(x) > class(y) > 0 */
	const cmp = (x, y) => {
		const a = String.fromCodePoint(x), b = String.fromCodePoint(y);
		if ((a + b).normalize('NFD') === b + a)
			return 1;
		if ((b + a).normalize('NFD') === a + b)
			return -1;
		return 0;
	};
	const sorted = [...nonzero].sort(cmp);
	const rank = new Map();
	let r = 0;
	for (let i = 0; i < sorted.length; i++) {
		if (i === 0 || cmp(sorted[i - 1], sorted[i]) !== 0)
			r++;
		rank.set(sorted[i], r);
	}
	if (r > 255)
		throw new Error(`${r} combining classes do not fit a byte`);
	/* the order must be total and consistent: check every adjacent pair and a sample of others */
	for (let i = 1; i < sorted.length; i++)
		if (cmp(sorted[i - 1], sorted[i]) > 0)
			throw new Error('combining class order is not consistent');

	const blocks = new Map(), index = [];
	for (let b = 0; b < 0x110000; b += 256) {
		const key = Buffer.from(t.subarray(b, b + 256)).toString('latin1');
		if (!blocks.has(key))
			blocks.set(key, blocks.size);
		index.push(blocks.get(key));
	}
	if (blocks.size > 256)
		throw new Error(`${blocks.size} distinct blocks do not fit a uint8_t index`);

	const out = [];
	const w = (s) => out.push(s);
	const pool = (list, name) => {
		const flat = [];
		const ent = [];
		for (const [cp, seq] of list) {
			ent.push(`{${hex(cp)}, ${flat.length}, ${seq.length}}`);
			flat.push(...seq);
		}
		w(`const struct wpu_map ${name}[${ent.length}] = {`);
		for (let i = 0; i < ent.length; i += 4)
			w('\t' + ent.slice(i, i + 4).join(', ') + ',');
		w('};');
		w(`const uint32_t ${name}_cps[${flat.length}] = {`);
		for (let i = 0; i < flat.length; i += 10)
			w('\t' + flat.slice(i, i + 10).map(hex).join(', ') + ',');
		w('};\n');
		return ent.length;
	};
	w(`/* wordpiece_tables.c - GENERATED by src/tokenize/gen_wordpiece.js; do not edit.
 *
 * Source: npm ${pkg8.name}@${pkg8.version} (General_Category Cc Cf Co Mn P), ${pkg9.name}@${pkg9.version}
 * (what is assigned, for NFD), node ${process.version} with Unicode ${process.versions.unicode} (NFD, combining
 * class order, lowercase, White_Space).  Regenerate:
 *   mkdir -p /tmp/ucd && cd /tmp/ucd &&
 *     npm install @unicode/unicode-8.0.0@${pkg8.version} @unicode/unicode-9.0.0@${pkg9.version}
 *   node src/tokenize/gen_wordpiece.js /tmp/ucd/node_modules > src/tokenize/wordpiece_tables.c
 *
 * ${blocks.size} distinct 256-entry flag blocks, ${decomp.length} decompositions (+ 11172 Hangul syllables,
 * computed), ${lower.length} lowercase mappings, ${nonzero.length} code points in ${r} nonzero combining classes. */
#include "tokenize/wordpiece.h"
`);
	w(`const uint8_t wpu_index[${index.length}] = {`);
	for (let i = 0; i < index.length; i += 24)
		w('\t' + index.slice(i, i + 24).join(',') + ',');
	w('};\n');
	w(`const uint8_t wpu_blocks[${blocks.size}][256] = {`);
	for (const key of blocks.keys()) {
		const b = Buffer.from(key, 'latin1');
		w('\t{');
		for (let i = 0; i < 256; i += 32)
			w('\t\t' + Array.from(b.subarray(i, i + 32)).join(',') + ',');
		w('\t},');
	}
	w('};\n');
	const nd = pool(decomp, 'wpu_decomp');
	const nl = pool(lower, 'wpu_lower');
	w(`const size_t wpu_decomp_n = ${nd}, wpu_lower_n = ${nl}, wpu_ccc_n = ${nonzero.length};\n`);
	w(`const struct wpu_ccc wpu_ccc[${nonzero.length}] = {`);
	const cc = nonzero.map((cp) => `{${hex(cp)}, ${rank.get(cp)}}`);
	for (let i = 0; i < cc.length; i += 6)
		w('\t' + cc.slice(i, i + 6).join(', ') + ',');
	w('};');
	process.stdout.write(out.join('\n') + '\n');
}

main().catch((e) => {
	console.error('gen_wordpiece.js: ' + e.message);
	process.exit(1);
});
