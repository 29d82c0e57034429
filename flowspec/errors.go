package flowspec

import (
	"fmt"
	"unicode/utf8"
)

// SyntaxError reports bad rule text and points at the offending word.
type SyntaxError struct {
	Input  string // the whole text
	Offset int    // byte offset of Word in Input
	Word   string // the offending word ("" at end of input)
	Msg    string // what is wrong and what was expected
}

// Column returns the 1-based column (in runes) of Word in Input.
func (e *SyntaxError) Column() int {
	off := e.Offset
	if off > len(e.Input) {
		off = len(e.Input)
	}
	if off < 0 {
		off = 0
	}
	return utf8.RuneCountInString(e.Input[:off]) + 1
}

// Error reads like
//
//	rule text: "foo" (column 12): unknown match component; expected one of ...
func (e *SyntaxError) Error() string {
	if e.Word == "" {
		return fmt.Sprintf("rule text: at end (column %d): %s", e.Column(), e.Msg)
	}
	return fmt.Sprintf("rule text: %q (column %d): %s", e.Word, e.Column(), e.Msg)
}

// DecodeError reports malformed wire bytes. A peer that sends such an NLRI
// must be handled as treat-as-withdraw (RFC 7606).
type DecodeError struct {
	Offset int    // byte offset in the input where the problem is
	Msg    string // why
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("flowspec: malformed input at byte %d: %s", e.Offset, e.Msg)
}

func decodeErr(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}
