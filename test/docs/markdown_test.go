package docs

import (
	"bufio"
	"regexp"
	"strings"
)

// page is one markdown file: its code blocks, inline code spans, links and heading anchors.
type page struct {
	name    string // relative to the repository root
	blocks  []codeBlock
	spans   []string
	links   []string
	anchors map[string]bool
}

// codeBlock is one fenced block: its info string and its lines.
type codeBlock struct {
	lang  string
	lines []string
}

var (
	inlineSpan = regexp.MustCompile("`([^`]+)`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDrop   = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// parsePage splits markdown into fenced blocks and the prose around them. Inline spans may
// run across a line break, so prose is read a paragraph at a time.
func parsePage(name, text string) page {
	p := page{name: name, anchors: map[string]bool{}}
	var cur *codeBlock
	var para []string
	flush := func() {
		joined := strings.Join(para, " ")
		for _, m := range inlineSpan.FindAllStringSubmatch(joined, -1) {
			p.spans = append(p.spans, strings.Join(strings.Fields(m[1]), " "))
		}
		for _, m := range mdLink.FindAllStringSubmatch(joined, -1) {
			p.links = append(p.links, m[1])
		}
		para = nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			p.blocks = append(p.blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		case strings.HasPrefix(line, "```"):
			flush()
			cur = &codeBlock{lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case strings.TrimSpace(line) == "":
			flush()
		default:
			if h, ok := heading(line); ok {
				flush()
				p.anchors[slug(h)] = true
			}
			para = append(para, line)
		}
	}
	flush()
	return p
}

// heading is the text of an ATX heading line.
func heading(line string) (string, bool) {
	t := strings.TrimLeft(line, "#")
	if t == line || len(line)-len(t) > 6 || !strings.HasPrefix(t, " ") {
		return "", false
	}
	return strings.TrimSpace(t), true
}

// slug is the anchor GitHub gives a heading.
func slug(h string) string {
	return strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
}

// shellBlock reports whether a block shows commands (not YAML, JSON or program output).
func shellBlock(lang string) bool {
	switch lang {
	case "", "sh", "text", "console":
		return true
	}
	return false
}

// blockCommands joins continued lines and drops comments; each result is one shell line.
func blockCommands(b codeBlock) []string {
	var out []string
	pending := ""
	for _, line := range b.lines {
		if more, ok := strings.CutSuffix(line, "\\"); ok {
			pending += more + " "
			continue
		}
		line = strings.TrimSpace(pending + line)
		pending = ""
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if pending != "" {
		out = append(out, strings.TrimSpace(pending))
	}
	return out
}

// shellSeparators end one command and start the next on a shell line. `sh -c '` starts a
// command too: the tour runs several inside the demo environment that way.
var shellSeparators = regexp.MustCompile(`&&|\|\||;|\s\|\s|\$\(|\bsh -e?c '`)

// snofactoryArgs returns the arguments of each snofactory command on a shell line: a
// command whose first word (after VAR=value assignments) is snofactory. Comments,
// redirections and the end of a quoted `sh -c` script end the arguments; brackets of a
// usage synopsis are dropped.
func snofactoryArgs(line string) [][]string {
	var out [][]string
	for _, seg := range shellSeparators.Split(line, -1) {
		words := strings.Fields(seg)
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			words = words[1:]
		}
		if len(words) == 0 || words[0] != "snofactory" {
			continue
		}
		var args []string
		for _, w := range words[1:] {
			if strings.HasPrefix(w, "#") || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") {
				break
			}
			// A quote that closes without opening ends the `sh -c '...'` the command is in.
			closes := strings.HasSuffix(w, "'") && !strings.HasPrefix(w, "'")
			if w = strings.Trim(w, "[]'\""); w != "" {
				args = append(args, w)
			}
			if closes {
				break
			}
		}
		out = append(out, args)
	}
	return out
}

// spanArgs returns the arguments of an inline span that shows a command: one that starts
// with snofactory, or with a top-level command and goes on to a flag or a subcommand.
func spanArgs(span string, root *cliCommand) ([]string, bool) {
	if cmds := snofactoryArgs(span); len(cmds) == 1 && strings.HasPrefix(span, "snofactory ") {
		return cmds[0], true
	}
	words := strings.Fields(span)
	if len(words) < 2 {
		return nil, false
	}
	top, ok := root.children[words[0]]
	if !ok {
		return nil, false
	}
	hasFlag := false
	for _, w := range words[1:] {
		hasFlag = hasFlag || strings.HasPrefix(w, "-")
	}
	if !hasFlag && len(top.children) == 0 {
		return nil, false
	}
	args := snofactoryArgs("snofactory " + span)
	return args[0], true
}
