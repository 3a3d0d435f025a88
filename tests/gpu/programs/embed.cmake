# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
# Writes IN as a C byte array NAME (8-byte aligned, as cuModuleLoadData
# wants for a fatbin) and its size NAME_size.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR size "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# A line per 16 bytes (CMake regexes have no {n}: repeat the byte pattern).
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line16)
string(REGEX REPLACE "(${line16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by embed.cmake. */\n#include <stddef.h>\n"
  "__attribute__((aligned(8))) const unsigned char ${NAME}[${size}] = {\n${bytes}\n};\n"
  "const size_t ${NAME}_size = ${size};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
