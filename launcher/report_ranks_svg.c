/*
 * report_ranks_svg.c - every rank's part of a step drawn (report.h): a row
 * per rank, named by its stage, replica and node, its parts of a step
 * stacked to scale and its peak memory beside them; past 64 ranks a row per
 * stage (the mean of its ranks, their largest memory).
 */
#include "launcher/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows drawn one per rank up to this many ranks; more are drawn one per
 * stage. */
#define MAX_RANK_ROWS 64
#define WW 1100.0 /* the view box width of the page's bars (report_svg.c) */

static const char *const part_names[] = { "compute", "pipeline wait", "gradient wait", "data",
					  "optimizer", "other" };
static const char *const part_colors[] = { "#5b8bd6", "#e0752d", "#b03aa8", "#c9a227",
					   "#2f9e64", "#c9d0db" };

/* One row's values: parts [6] (the step's less its parts is "other"),
 * its step and its memory. */
struct row {
	char label[128];
	double part[6], step, mib;
};

static void row_of_rank(const struct launch__report_ranks *k, int i, struct row *w)
{
	const double *t = &k->t[(size_t)i * LAUNCH__T_N];
	double sum = 0;
	int j;

	snprintf(w->label, sizeof(w->label), "rank %d · stage %d · replica %d · %s", i,
		 k->stage[i], k->replica[i], k->node[i]);
	for (j = 1; j < LAUNCH__T_N; j++) {
		w->part[j - 1] = t[j] > 0 ? t[j] : 0;
		sum += w->part[j - 1];
	}
	w->step = t[LAUNCH__T_STEP];
	w->part[5] = w->step > sum ? w->step - sum : 0;
	w->mib = k->rss_mib[i];
}

/* Stage s: the mean over its ranks, the largest memory. */
static void row_of_stage(const struct launch__report_ranks *k, int s, struct row *w)
{
	struct row one;
	int i, n = 0, j;

	memset(w, 0, sizeof(*w));
	for (i = 0; i < k->n; i++) {
		if (k->stage[i] != s)
			continue;
		row_of_rank(k, i, &one);
		for (j = 0; j < 6; j++)
			w->part[j] += one.part[j];
		w->step += one.step;
		w->mib = fmax(w->mib, one.mib);
		n++;
	}
	for (j = 0; n && j < 6; j++)
		w->part[j] /= n;
	if (n)
		w->step /= n;
	snprintf(w->label, sizeof(w->label), "stage %d · %d ranks (mean)", s, n);
}

static int draw_row(struct dt_buf *out, const struct row *w, int i, double y, double scale)
{
	double x = 330;
	int j, rc;

	rc = dt_buf_printf(out, "<g class=\"rank\" data-rank=\"%d\"><text class=\"tick\" x=\"10\" y=\"%.0f\">",
			   i, y + 13);
	if (!rc)
		rc = launch__html_text(out, w->label);
	if (!rc)
		rc = dt_buf_puts(out, "</text>\n");
	for (j = 0; !rc && j < 6; j++) {
		double wd = w->part[j] * scale;

		rc = dt_buf_printf(out, "<rect class=\"part\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"16\" fill=\"%s\">"
				   "<title>%s: %.4g s per step (%.1f%%)</title></rect>\n", x, y, wd,
				   part_colors[j], part_names[j], w->part[j],
				   w->step > 0 ? 100 * w->part[j] / w->step : 0.0);
		x += wd;
	}
	if (!rc)
		rc = dt_buf_printf(out, "<text class=\"tick\" x=\"%.0f\" y=\"%.0f\">%.3g %s</text>"
				   "<text class=\"tick mem\" x=\"%.0f\" y=\"%.0f\">%.0f MiB</text></g>\n",
				   x + 6, y + 13, w->step < 1 ? 1e3 * w->step : w->step,
				   w->step < 1 ? "ms" : "s", WW - 90, y + 13, w->mib);
	return rc;
}

int launch__svg_ranks(struct dt_buf *out, const struct launch__report_ranks *k)
{
	struct row *rows;
	bool by_stage = k->n > MAX_RANK_ROWS;
	int n = by_stage ? k->stages : k->n, i, j, rc;
	double most = 0, lx = 330;

	if (k->n <= 0 || k->windows == 0)
		return 0;
	if (!(rows = calloc((size_t)n, sizeof(*rows))))
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (by_stage)
			row_of_stage(k, i, &rows[i]);
		else
			row_of_rank(k, i, &rows[i]);
		most = fmax(most, rows[i].step);
	}
	rc = dt_buf_printf(out, "<h3>Rank by rank</h3>\n<p>%s of the newest start: the mean over its %d log windows (%lld steps) of each part of a step; memory: the rank's peak resident memory%s</p>\n"
			   "<figure><svg class=\"stack\" id=\"ranks\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n",
			   by_stage ? "Every stage" : "Every rank", k->windows, k->steps,
			   by_stage ? " (the largest of the stage's ranks)" : "", WW, 24.0 * n + 34);
	for (i = 0; !rc && i < n; i++)
		rc = draw_row(out, &rows[i], i, 4 + 24.0 * i, most > 0 ? (WW - 330 - 170) / most : 0);
	for (j = 0; !rc && j < 6; j++) {
		rc = dt_buf_printf(out, "<g class=\"legend\"><rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
				   "<text x=\"%.0f\" y=\"%.0f\">%s</text></g>\n", lx, 24.0 * n + 14,
				   part_colors[j], lx + 16, 24.0 * n + 24, part_names[j]);
		lx += 34 + 7.0 * (double)strlen(part_names[j]);
	}
	if (!rc)
		rc = dt_buf_puts(out, "</svg></figure>\n");
	free(rows);
	return rc;
}
