// Package depotfile is the depot file: the blueprints a depot builds together and the
// resources they share (VM slots, CPUs, memory, a disk watermark), loaded as strictly as a
// blueprint (FILE:LINE:COL, all problems at once).
package depotfile
