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
// sent, so a typo on line 9,000 stores nothing. Adds go in batches
// (POST /v1/rules/batch), each all or none, as large as the daemon takes:
// its 413 says how many rules and bytes fit, and the batch is split again
// by it. Withdrawals go one by one (POST /v1/rules/withdraw).

// maxFileLineBytes bounds one line of a rules file.
const maxFileLineBytes = 64 << 10

// progressEvery is how many rules a withdrawal from a file does between
// two progress lines.
const progressEvery = 1000

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
		text := strings.TrimSpace(sc.Text())
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

// next returns how many of reqs (at least one) go in the next batch.
func (b batchBounds) next(reqs []api.AddRuleRequest) int {
	size := int64(len(`{"rules":[]}`))
	for i, r := range reqs {
		if i == b.rules {
			return i
		}
		j, _ := json.Marshal(r)
		size += int64(len(j)) + 1
		if size > b.bytes && i > 0 {
			return i
		}
	}
	return len(reqs)
}

// ruleIndex finds the rule a batch error names ("rules[3].text").
var ruleIndex = regexp.MustCompile(`^rules\[(\d+)\]`)

// addFile adds the rules of lines in batches, each with the flags of req,
// printing each rule's id on stdout and, for more than one batch, a
// progress line per batch on stderr.
func (c *cli) addFile(ctx context.Context, name string, lines []fileLine, req api.AddRuleRequest) error {
	reqs := make([]api.AddRuleRequest, len(lines))
	for i, l := range lines {
		reqs[i] = req
		reqs[i].Text = l.text
	}
	bounds := batchBounds{rules: api.DefaultMaxBatchRules, bytes: api.DefaultMaxBodyBytes}
	done, batches := 0, 0
	for done < len(reqs) {
		n := bounds.next(reqs[done:])
		stored, err := c.client.AddRules(ctx, reqs[done:done+n])
		if err != nil {
			var e *api.Error
			if errors.As(err, &e) && bounds.learn(e, n) {
				continue // nothing of this batch was stored: split it
			}
			return c.fileError(name, lines, done, n, err)
		}
		for _, r := range stored {
			fmt.Fprintln(c.stdout, r.ID)
		}
		done += n
		batches++
		if batches > 1 || done < len(reqs) {
			fmt.Fprintf(c.stderr, "%s: %d of %d rules stored (batch %d, %d rules)\n", name, done, len(reqs), batches, n)
		}
	}
	fmt.Fprintf(c.stderr, "stored %d rules from %s in %d batches\n", done, name, batches)
	return nil
}

// fileError says which line of a batch (lines[from:from+n]) the daemon
// refused and what was stored before it.
func (c *cli) fileError(name string, lines []fileLine, from, n int, err error) error {
	where := fmt.Sprintf("lines %d-%d", lines[from].no, lines[from+n-1].no)
	var e *api.Error
	if errors.As(err, &e) {
		if m := ruleIndex.FindStringSubmatch(e.Field); m != nil {
			if i, perr := strconv.Atoi(m[1]); perr == nil && i < n {
				where = "line " + strconv.Itoa(lines[from+i].no)
			}
		}
	}
	stored := "nothing was stored"
	if from > 0 {
		stored = fmt.Sprintf("the %d rules before line %d were stored, none after; fix it and run again: a rule stored again is updated, not duplicated", from, lines[from].no)
	}
	return fmt.Errorf("%s %s: %w; %s", name, where, err, stored)
}

// withdrawFile withdraws the active rule of each line's match, one
// request per line, printing each withdrawn rule on stdout and, past
// progressEvery lines, a progress line on stderr every progressEvery.
func (c *cli) withdrawFile(ctx context.Context, name string, lines []fileLine) error {
	withdrawn, none := 0, 0
	for i, l := range lines {
		rules, err := c.client.WithdrawMatch(ctx, l.text)
		if err != nil {
			return fmt.Errorf("%s line %d: %w (the %d lines before it were done)", name, l.no, err, i)
		}
		if len(rules) == 0 {
			none++
		}
		for _, r := range rules {
			withdrawn++
			fmt.Fprintf(c.stdout, "rule %d: %s\n", r.ID, safeText(r.State))
		}
		if (i+1)%progressEvery == 0 && i+1 < len(lines) {
			fmt.Fprintf(c.stderr, "%s: %d of %d lines done\n", name, i+1, len(lines))
		}
	}
	fmt.Fprintf(c.stderr, "withdrew %d rules from %s; %d lines matched no active rule\n", withdrawn, name, none)
	return nil
}
