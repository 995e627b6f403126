// Package suggest helps messages talk about a user's values: the closest known word to a
// misspelt one, for did-you-mean hints, and a value clipped for quoting. The blueprint loader
// and the stages that name a user's values back (resolve's catalog packages and channels)
// share it, so a slip gets the same hint wherever it is caught.
package suggest
