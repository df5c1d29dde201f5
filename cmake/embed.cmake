# Turn a file into a C array at build time (the /ui page, extender/serve/ui.html):
#   cmake -DINPUT=f -DOUTPUT=f.c -DSYMBOL=name -P cmake/embed.cmake
# defines `const unsigned char name[]` (NUL-terminated) and `const size_t name_len`.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR len "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
       bytes "${bytes}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
     "/* Generated from ${name} by cmake/embed.cmake at build time: edit ${name}, not this file. */\n"
     "#include <stddef.h>\n"
     "const unsigned char ${SYMBOL}[] = {\n${bytes}0x00};\n"
     "const size_t ${SYMBOL}_len = ${len};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
