/* punkt_builtin - the built-in Punkt parameters: share/lmtk/punkt-english.json, compiled in.
 *
 * The file is the artifact (readable, diffable, loadable by NLTK through tests/ref/punkt-ref.py,
 * installed beside the programs); the assembler's .incbin puts its bytes into the program as
 * they are, so the two cannot drift apart and no generated C source is needed.  The path is
 * relative to the top of the tree, where make runs the compiler; the Makefile makes this
 * object depend on the file. */
#include <stddef.h>

__asm__(".pushsection .rodata\n"
	".global punkt_builtin_json\n"
	".type punkt_builtin_json, @object\n"
	".balign 16\n"
	"punkt_builtin_json:\n"
	".incbin \"share/lmtk/punkt-english.json\"\n"
	"punkt_builtin_json_end:\n"
	".byte 0\n"
	".balign 8\n"
	".global punkt_builtin_len\n"
	".type punkt_builtin_len, @object\n"
	"punkt_builtin_len:\n"
	".quad punkt_builtin_json_end - punkt_builtin_json\n"
	".popsection\n");
