/* tokrec - the record of the tokenizer files a run trains with, for its checkpoints' manifests.
 *
 * An export (ckpt-merge-tp --format hf) copies the tokenizer beside the weights.  It used to
 * find the files by reading --vocab-file and friends out of the manifest's "args", the command
 * line as a string: whoever could edit a checkpoint could make the export copy any file the
 * exporting user can read (/etc/shadow, as root), world-readable.  So train records each file
 * it was given as {"role", "path" (absolute), "size", "sha256"}, hashed once at the start, and
 * the exporter copies a file only while its bytes still hash the same (lmtk-checkpoint(5)).
 * A tokenizer directory (--tokenizer-name-or-path DIR) is recorded as its tokenizer.json and,
 * where it has them, its special_tokens_map.json and tokenizer_config.json: they name the eos
 * token (the end of document) and the other special tokens the export's configs carry. */
#ifndef CKPT_TOKREC_H
#define CKPT_TOKREC_H

#include <stddef.h>

/* The manifest's "tokenizer" object as JSON text (malloc'd): {"type": T, "files": [...]} for
 * --tokenizer-type (NULL: none), --vocab-file, --merge-file and --tokenizer-name-or-path (a
 * directory: its tokenizer.json, special_tokens_map.json and tokenizer_config.json), each NULL
 * when not given.  A file that cannot be read is left
 * out with a warning.  NULL only when out of memory. */
char *tokrec_json(const char *type, const char *vocab_file, const char *merge_file,
		  const char *name_or_path);

#endif
