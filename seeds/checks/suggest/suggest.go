package suggest

import (
	"fmt"
	"strings"
)

// Clip shortens a user's value for quoting in a message: a hostile or mistaken multi-megabyte
// value must not become a multi-megabyte error.
func Clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) > max {
		r = r[:max]
	}
	return string(r) + fmt.Sprintf("... (%d bytes)", len(s))
}

// Closest returns the candidate nearest to word, or "" when none is near enough to be a
// plausible typo. Case, '-' and '_' differences count as no distance at all, so
// release_image finds releaseImage.
func Closest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	nw := normalize(word)
	best, bestD := "", -1
	for _, c := range candidates {
		nc := normalize(c)
		if diff := len(nw) - len(nc); diff > 3 || diff < -3 {
			continue // too far apart to be within the limit; skip the quadratic work
		}
		d := distance(nw, nc)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// Allow roughly one edit per three characters, at least one, at most three.
	limit := len([]rune(nw)) / 3
	if limit < 1 {
		limit = 1
	}
	if limit > 3 {
		limit = 3
	}
	if bestD >= 0 && bestD <= limit {
		return best
	}
	// A truncated name (pullSecret for pullSecretFile) is a likely slip too.
	if len(nw) >= 4 {
		for _, c := range candidates {
			if strings.HasPrefix(normalize(c), nw) {
				return c
			}
		}
	}
	return ""
}

func normalize(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "", "_", "").Replace(s)
}

// distance is the optimal string alignment distance (Levenshtein plus adjacent
// transpositions), on runes. Inputs are bounded by the caller's key length limits.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		return 1 << 30
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
