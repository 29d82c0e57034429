package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Rules from a file: "rule add --file F" and "rule withdraw --file F" (F
// "-" is stdin) take one rule text per line; blank lines and lines
// starting with # are skipped. Every line is parsed before anything is
// sent, so a typo on line 9,000 stores nothing. Both go in batches (POST
// /v1/rules/batch, /v1/rules/withdraw/batch), each all or none, of at most
// fileBatchRules rules and as large as the daemon takes: its 413 says how
// many rules and bytes fit, and the batch is split again by it.

// fileBatchRules caps the rules of one batch below the daemon's own
// bounds: a batch of 10,000 withdrawals takes seconds, and each request
// must answer well inside the client's timeout, with a progress line
// between two.
const fileBatchRules = 2000

// maxFileLineBytes bounds one line of a rules file.
const maxFileLineBytes = 64 << 10

// lineText is the rule text of line no (1-based) of a rules file: the
// line without the spaces around it (a Windows editor's \r too), and on
// the first line without the UTF-8 byte order mark some editors write at
// the start of a file (it would be read as part of the first rule, which
// the daemon refuses as text it cannot parse).
func lineText(no int, line string) string {
	if no == 1 {
		line = strings.TrimPrefix(line, "\uFEFF")
	}
	return strings.TrimSpace(line)
}

// fileLine is one rule text of a file and where it was.
type fileLine struct {
	no   int // 1-based line number
	text string
}

// readRuleFile reads the rule texts of path ("-": in), parsing each; it
// returns every line that does not parse (at most maxFileErrors) as one
// error naming the lines.
func readRuleFile(path string, in io.Reader) ([]fileLine, error) {
	name := fileName(path)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), maxFileLineBytes)
	var (
		lines []fileLine
		bad   []string
		nbad  int
	)
	for no := 1; sc.Scan(); no++ {
		text := lineText(no, sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if _, err := flowspec.Parse(text); err != nil {
			if nbad++; nbad <= maxFileErrors {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", name, no, api.OneLine(err.Error())))
			}
			continue
		}
		lines = append(lines, fileLine{no: no, text: text})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line is longer than %d bytes: one rule text per line", name, maxFileLineBytes)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if nbad > 0 {
		more := ""
		if nbad > len(bad) {
			more = fmt.Sprintf("; and %d more", nbad-len(bad))
		}
		return nil, fmt.Errorf("%d lines do not parse, nothing was sent: %s%s", nbad, strings.Join(bad, "; "), more)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s holds no rule: one rule text per line ('match ... then ...' or 'route PREFIX then blackhole'); blank lines and # comments are skipped", name)
	}
	return lines, nil
}

// maxFileErrors is how many bad lines an error of readRuleFile names.
const maxFileErrors = 5

// batchBounds is how much one batch request may hold.
type batchBounds struct {
	rules int
	bytes int64
}

// learn narrows b by what a 413 said fits, and reports whether the
// request should be split and sent again: when the daemon named smaller
// bounds, or (a daemon that names none) by halving a batch of n rules.
func (b *batchBounds) learn(e *api.Error, n int) bool {
	if e.Status != http.StatusRequestEntityTooLarge {
		return false
	}
	narrowed := false
	if e.MaxBatchRules > 0 && e.MaxBatchRules < b.rules {
		b.rules, narrowed = e.MaxBatchRules, true
	}
	if e.MaxBodyBytes > 0 && e.MaxBodyBytes < b.bytes {
		b.bytes, narrowed = e.MaxBodyBytes, true
	}
	if !narrowed && e.MaxBatchRules == 0 && e.MaxBodyBytes == 0 && n > 1 {
		b.rules, narrowed = n/2, true
	}
	return narrowed
}

// next returns how many of the rules whose JSON sizes are sizes (at
// least one) go in the next batch.
func (b batchBounds) next(sizes []int) int {
	size := int64(len(`{"rules":[]}`))
	for i, n := range sizes {
		if i == b.rules {
			return i
		}
		size += int64(n) + 1
		if size > b.bytes && i > 0 {
			return i
		}
	}
	return len(sizes)
}

// ruleIndex finds the rule a batch error names ("rules[3].text").
var ruleIndex = regexp.MustCompile(`^rules\[(\d+)\]`)

// inBatches sends the rules of lines, whose JSON sizes are sizes, in
// batches as large as the daemon takes: send sends lines[from:from+n]
// and returns the daemon's error. A batch the daemon finds too large
// stored nothing: it is split by what the 413 says fits. past names what
// was done ("stored", "withdrawn") in the progress lines on stderr, one
// per batch when there is more than one.
func (c *cli) inBatches(name, past string, lines []fileLine, sizes []int, send func(from, n int) error) (int, error) {
	bounds := batchBounds{rules: min(fileBatchRules, api.DefaultMaxBatchRules), bytes: api.DefaultMaxBodyBytes}
	done, batches := 0, 0
	for done < len(lines) {
		n := bounds.next(sizes[done:])
		if err := send(done, n); err != nil {
			var e *api.Error
			if errors.As(err, &e) && bounds.learn(e, n) {
				continue
			}
			return batches, c.fileError(name, past, lines, done, n, err)
		}
		done += n
		batches++
		if batches > 1 || done < len(lines) {
			fmt.Fprintf(c.stderr, "%s: %d of %d rules %s (batch %d, %d rules)\n", name, done, len(lines), past, batches, n)
		}
	}
	return batches, nil
}

// jsonSizes is the size of each value's JSON.
func jsonSizes[T any](vs []T) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		j, _ := json.Marshal(v)
		out[i] = len(j)
	}
	return out
}

// addFile adds the rules of lines in batches, each with the flags of req,
// printing each rule's id on stdout.
func (c *cli) addFile(ctx context.Context, name string, lines []fileLine, req api.AddRuleRequest) error {
	reqs := make([]api.AddRuleRequest, len(lines))
	for i, l := range lines {
		reqs[i] = req
		reqs[i].Text = l.text
	}
	batches, err := c.inBatches(name, "stored", lines, jsonSizes(reqs), func(from, n int) error {
		ids, err := c.client.StoreRules(ctx, reqs[from:from+n])
		for _, id := range ids {
			fmt.Fprintln(c.stdout, id)
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "stored %d rules from %s in %d batches\n", len(lines), name, batches)
	return nil
}

// withdrawFile withdraws the active rule of each line's match in
// batches, printing each withdrawn rule on stdout.
func (c *cli) withdrawFile(ctx context.Context, name string, lines []fileLine) error {
	reqs := make([]api.WithdrawMatchRequest, len(lines))
	for i, l := range lines {
		reqs[i].Text = l.text
	}
	withdrawn := 0
	batches, err := c.inBatches(name, "withdrawn", lines, jsonSizes(reqs), func(from, n int) error {
		rules, err := c.client.WithdrawMatches(ctx, reqs[from:from+n])
		for _, r := range rules {
			withdrawn++
			fmt.Fprintf(c.stdout, "rule %d: %s\n", r.ID, safeText(r.State))
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "withdrew %d rules from %s in %d batches; %d lines matched no active rule\n", withdrawn, name, batches, len(lines)-withdrawn)
	return nil
}

// fileError says which line of a batch (lines[from:from+n]) the daemon
// refused and what was done before it.
func (c *cli) fileError(name, past string, lines []fileLine, from, n int, err error) error {
	where := fmt.Sprintf("lines %d-%d", lines[from].no, lines[from+n-1].no)
	var e *api.Error
	if errors.As(err, &e) {
		if m := ruleIndex.FindStringSubmatch(e.Field); m != nil {
			if i, perr := strconv.Atoi(m[1]); perr == nil && i < n {
				where = "line " + strconv.Itoa(lines[from+i].no)
			}
		}
	}
	done := "nothing was " + past
	if from > 0 {
		done = fmt.Sprintf("the %d rules before line %d were %s, none after; fix it and run again: a rule done again is updated or skipped, not duplicated", from, lines[from].no, past)
	}
	return fmt.Errorf("%s %s: %w; %s", name, where, err, done)
}
