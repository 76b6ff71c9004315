"""Tables and figures in the style of the seed papers.

- `plots`: figures of one run (throughput, J(t), cwnd, RTT, queue, drops, marks; CDF
  and box plots), each drawing into ``ax=`` and returning its Figure;
- `summary_figures`: one number per campaign condition against the swept quantity;
- `campaign_report`: `fairlab report` (report.md, report.html, figures/);
- `style`: the one figure style and `save_figure` (PNG 300 dpi, PDF, SVG);
- `format`, `citations`, `setup`: the text a reader sees (SI units, papers by author
  and year, the set-up tables); a condition's name is `campaign.plan.condition_label`,
  the one the plan's tasks carry;
- `notebook`, `templating`: Jupyter displays and the Jinja2 templates.

Nothing here changes matplotlib's global state or imports pyplot.
"""
