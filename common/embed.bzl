"""embed_text: a file's text as a `const char SYMBOL[]` in a generated .cc
(how generated sources carry the ABI header and kiln_math.h)."""

def embed_text(name, src, symbol, visibility = None):
    out = name + ".cc"
    native.genrule(
        name = name + "_cc",
        srcs = [src],
        outs = [out],
        cmd = ("(echo 'extern const char %s[] = R\"KILNTEXT('; cat $<; " % symbol) +
              "echo ')KILNTEXT\";') > $@",
    )
    native.cc_library(
        name = name,
        srcs = [out],
        visibility = visibility,
    )
