/* Embeds one module's fatbin (FH_FATBIN_PATH) into the executable as read-only data between
 * the symbols fh_fatbin_<FH_MODULE>_begin and fh_fatbin_<FH_MODULE>_end.
 * Assembled once per module by cuda/meson.build; see docs/architecture.md for why .incbin. */
#define FH_CAT2(a, b, c) a##b##c
#define FH_CAT(a, b, c) FH_CAT2(a, b, c)
#define FH_BEGIN FH_CAT(fh_fatbin_, FH_MODULE, _begin)
#define FH_END FH_CAT(fh_fatbin_, FH_MODULE, _end)

    .section .rodata.fh_fatbin, "a", @progbits
    .balign 64                      /* cudaLibraryLoadData wants an aligned image */
    .globl FH_BEGIN
    .type FH_BEGIN, @object
FH_BEGIN:
    .incbin FH_FATBIN_PATH
    .globl FH_END
    .type FH_END, @object
FH_END:
    .byte 0
    .section .note.GNU-stack, "", @progbits
