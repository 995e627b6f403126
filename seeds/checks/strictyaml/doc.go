// Package strictyaml decodes the YAML documents users write (blueprints, site configs) into
// Go types strictly, reporting every problem at once with its position: FILE:LINE:COL: PATH:
// MESSAGE; hint: HINT. Unknown keys (with a did-you-mean hint or the place they belong),
// duplicate keys, YAML 1.1 guesses (yes for true), tags, merge keys and wrong scalar types are
// problems; hostile input (alias bombs, deep nesting, huge values) fails fast. A Decoder
// remembers where every path it decoded sits in the file, so a schema's own validation
// errors, named by path, are reported at their line and column too (Decoder.Report).
package strictyaml
