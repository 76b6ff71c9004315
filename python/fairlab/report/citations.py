"""The seed papers as a reader knows them: by authors and year, never by file name.

Code comments and developer docs say "seed 001"; anything a reader of a report sees
(figure titles, legends, captions, report text) cites with `cite`.
"""

from __future__ import annotations

#: seed number → (short citation, full reference). Years and authors are those the
#: documents themselves give (the USC lab's document version is 06-14-2019).
SEEDS: dict[str, tuple[str, str]] = {
    "000": ("Bhatti et al. 2009", 'S. Bhatti, M. Bateman, D. Rehunathan, T. Henderson, G. Bigwood, D. Miras, "Revisiting inter-flow fairness"'),
    "001": ("Bhatti, Bateman & Miras 2008", 'S. Bhatti, M. Bateman, D. Miras, "A Comparative Performance Evaluation of DCCP", SPECTS 2008'),
    "002": ("Zhang & Ye 2004", 'S. Zhang, C. Ye, "An adaptive mechanism to guarantee the bandwidth fairness of TCP flows", J. Zhejiang Univ. Sci. 2004'),
    "003": ("USC Lab 10 (2019)", 'University of South Carolina, "Lab 10: Measuring TCP Fairness", Network Tools and Protocols, 2019'),
    "004": ("Xue et al. 2012", 'L. Xue, S. Kumar, C. Cui, S.-J. Park, "Fairness Among Heterogeneous TCP Variants Over 10Gbps High-speed Networks"'),
}

#: Beyond the seeds: works the report names.
OTHER = {"ware2019": ("Ware et al. 2019", 'R. Ware, M. Mukerjee, S. Seshan, J. Sherry, "Beyond Jain\'s Fairness Index: Setting the Bar for the Deployment of Congestion Control Algorithms", HotNets 2019')}


def cite(seed: str) -> str:
    """The short citation of a seed: ``cite("000") == "Bhatti et al. 2009"``."""
    if seed in SEEDS:
        return SEEDS[seed][0]
    return OTHER[seed][0]


def references(keys: list[str]) -> list[str]:
    """Full references of the given seeds, in the order given, each once."""
    out: list[str] = []
    for k in dict.fromkeys(keys):
        short, full = SEEDS.get(k) or OTHER[k]
        out.append(f"{short}: {full}")
    return out
