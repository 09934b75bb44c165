package safe

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsNil reports whether v is nil, or an interface holding a nil pointer,
// map, slice, func or channel: a value a method call would panic on.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// JoinCtx returns err joined with ctx's error when ctx has ended and err
// does not match it already, so that both match errors.Is; err otherwise
// (nil stays nil only while ctx is live: JoinCtx is for errors).
func JoinCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// Printable reports whether s is valid UTF-8 without control characters
// (Unicode category Cc: NUL, newline, DEL, the C1 controls, ...), format
// characters (category Cf: U+200B zero-width space, U+202E right-to-left
// override, U+FEFF, the bidi isolates, ...) or other default-ignorable
// characters (Unicode's Default_Ignorable_Code_Point: the Hangul fillers
// U+115F, U+1160, U+3164 and U+FFA0, the combining grapheme joiner U+034F,
// the variation selectors U+180B-U+180F, U+FE00-U+FE0F, ...): the rule of
// lease names, job names, partitions and holder labels, which travel into
// Redis keys, SQL text, logs and an operator's terminal, where an invisible
// or reordering character would make one name look like another. ASCII is
// checked byte by byte.
func Printable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return printableUTF8(s[i:])
		}
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

func printableUTF8(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
			return false
		}
	}
	return true
}

// Blank reports whether s is not empty and holds only white space
// (unicode.IsSpace: " ", U+00A0, U+3000, ...) or the blank-looking U+2800
// braille pattern blank: a name that shows as nothing in a console or a
// terminal. (The blank-looking Hangul fillers are default-ignorable, which
// Printable refuses.)
func Blank(s string) bool {
	return s != "" && strings.TrimFunc(s, blankRune) == ""
}

// blankRune reports whether r shows as empty space.
func blankRune(r rune) bool { return unicode.IsSpace(r) || r == '\u2800' }
