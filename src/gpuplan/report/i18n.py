"""The fixed strings of the reports, in English and French. The lines gpuplan's core writes (reasons, notes, FAQ
answers) are English; report/translate.py gives them in French from the translation memory data/i18n_fr.toml."""

from __future__ import annotations

from gpuplan.errors import InputError

LANGS = ("en", "fr")

#: key -> (English, French); `{name}` fields are filled by `t(key, lang, name=...)`
STRINGS: dict[str, tuple[str, str]] = {
    "title": ("gpuplan plan: {project}", "gpuplan plan : {project}"),
    "made_for": ("Plan made for {date}: prices are judged as of that date.",
                 "Plan établi pour le {date} : les prix sont jugés à cette date."),
    "h_verdict": ("Verdict", "Verdict"),
    "h_server": ("Recommended server", "Serveur recommandé"),
    "h_candidates": ("Candidates", "Configurations candidates"),
    "h_checklist": ("Decision checklist", "Liste de contrôle de la décision"),
    "h_deployments": ("Deployment options", "Options de déploiement"),
    "h_growth": ("Growth: what still fits", "Croissance : ce qui tient encore"),
    "h_faq": ("Questions and answers", "Questions et réponses"),
    "h_rejected": ("GPUs not chosen, and why", "GPU écartés, et pourquoi"),
    "h_notes": ("Notes", "Remarques"),
    "h_figures": ("Figures", "Figures"),
    "h_sources": ("Assumptions and sources", "Hypothèses et sources"),
    "verdict": ("{label} (ranked by {objective}): {servers} x {platform} with {gpus} x {gpu} ({gpu_id}), {layout}; "
                "time {time}, price {price}; {mem} GiB per GPU ({grown} after growth).",
                "{label} (classement : {objective}) : {servers} x {platform} avec {gpus} x {gpu} ({gpu_id}), "
                "{layout} ; durée {time}, prix {price} ; {mem} Gio par GPU ({grown} après croissance)."),
    "recommended": ("Recommended", "Recommandation"),
    "h_server_if_buy": ("If you buy: the server", "En cas d'achat : le serveur"),
    "server_of": ("{servers} x {platform} with {gpus} x {gpu}", "{servers} x {platform} avec {gpus} x {gpu}"),
    "verdict_deploy": ("Deployment: {option} ({provider}), {total} over the horizon, {monthly}/month running.",
                       "Déploiement : {option} ({provider}), {total} sur l'horizon, {monthly}/mois de "
                       "fonctionnement."),
    "verdict_deploy_run": ("Deployment: {option} ({provider}), {run} per run ({total} over the horizon).",
                           "Déploiement : {option} ({provider}), {run} par exécution ({total} sur l'horizon)."),
    "no_recommendation": ("No configuration qualifies.", "Aucune configuration ne convient."),
    "act_buy": ("Buy {item} for {price}: {total} over {months} months with power, hosting, support and staff, "
                "less its resale.",
                "Acheter {item} pour {price} : {total} sur {months} mois avec l'électricité, l'hébergement, le "
                "support et le personnel, moins la revente."),
    "act_cloud": ("Rent {item} in the cloud, {kind} at {rate}/GPU-hour (the median of {providers}): {cost}.",
                  "Louer {item} dans le cloud, {kind} à {rate}/GPU-heure (médiane de {providers}) : {cost}."),
    "act_managed": ("Rent {item} (managed dedicated servers, {gpus} GPUs): {cost}.",
                    "Louer {item} (serveurs dédiés infogérés, {gpus} GPU) : {cost}."),
    "act_first": (" ({servers} for today's load, {more} more for the first month's)",
                  " ({servers} pour la charge d'aujourd'hui, {more} de plus pour celle du premier mois)"),
    "act_per_run": ("{cost} per run of {time}, {total} over {months} months",
                    "{cost} par exécution de {time}, {total} sur {months} mois"),
    "act_per_month": ("{cost} a month, {total} over {months} months", "{cost} par mois, {total} sur {months} mois"),
    "act_runner": ("The next way, {what}: {total} over {months} months{when}.",
                   "L'option suivante, {what} : {total} sur {months} mois{when}."),
    "act_dearer": (", dearer from the start", ", plus chère dès le départ"),
    "act_until": (", cheaper only until month {month}", ", moins chère seulement jusqu'au mois {month}"),
    "way_on-prem": ("buying it", "l'achat"),
    "way_managed": ("managed hosting ({provider})", "l'hébergement infogéré ({provider})"),
    "way_cloud": ("the cloud ({provider})", "le cloud ({provider})"),
    "kind_on-demand": ("on demand", "à la demande"),
    "kind_spot": ("on spot capacity", "en capacité spot"),
    "kind_reserved-1y": ("reserved for 1 year", "réservé 1 an"),
    "kind_reserved-3y": ("reserved for 3 years", "réservé 3 ans"),
    "if_you_buy": ("If you buy", "En cas d'achat"),
    "objective_cost": ("cost", "coût"),
    "objective_time": ("time", "durée"),
    "objective_balanced": ("balanced", "équilibré"),
    "spec": ("{cpu_sockets} x {cpu} ({cores} cores), {ram} GB RAM, {drives} x NVMe = {storage} TB at {read} GB/s, "
             "{net} Gb/s network, {power} kW, {btu} BTU/h ({cooling})",
             "{cpu_sockets} x {cpu} ({cores} cœurs), {ram} Go de RAM, {drives} x NVMe = {storage} To à {read} Go/s, "
             "réseau {net} Gb/s, {power} kW, {btu} BTU/h ({cooling})"),
    "rack_units": ("{u} U", "{u} U"),
    "warning": ("warning", "attention"),
    "candidates_caption_one": ("Best {shown} of {total}; * on the time/cost Pareto front.",
                               "La meilleure sur {total} ; * sur le front de Pareto durée/coût."),
    "candidates_caption": ("Best {shown} of {total}; * on the time/cost Pareto front.",
                           "Les {shown} meilleures sur {total} ; * sur le front de Pareto durée/coût."),
    "col_gpu": ("GPU", "GPU"),
    "col_shape": ("per server x servers", "par serveur x serveurs"),
    "col_layout": ("layout", "parallélisme"),
    "col_mem": ("GiB/GPU", "Gio/GPU"),
    "col_time": ("time", "durée"),
    "col_price": ("price", "prix"),
    "col_ranked": ("cost as ranked (over the horizon)", "coût classé (sur l'horizon)"),
    "col_score": ("score", "score"),
    "col_candidate": ("candidate", "configuration"),
    "col_item": ("item", "point"),
    "col_verdict": ("verdict", "verdict"),
    "col_why": ("why", "pourquoi"),
    "col_option": ("option", "option"),
    "col_provider": ("provider", "fournisseur"),
    "col_upfront": ("upfront", "investissement"),
    "col_monthly": ("per month", "par mois"),
    "col_resale": ("resale", "revente"),
    "col_total": ("total", "total"),
    "col_breakeven": ("break-even", "point mort"),
    "v_pass": ("pass", "conforme"),
    "v_warn": ("warn", "à vérifier"),
    "v_fail": ("fail", "non conforme"),
    "v_not evaluated": ("not evaluated", "non évalué"),
    "be_never": ("never", "jamais"),
    "be_now": ("now", "dès le départ"),
    "be_month": ("month {m}", "mois {m}"),
    "be_vs": ("vs {other}: {when}", "face à {other} : {when}"),
    "chosen": ("chosen", "retenue"),
    "unit_day": ("d", "j"),
    "unit_per_request": ("s/req", "s/requête"),
    "unit_per_billion": ("/1B tok", "/1 Md jetons"),
    "word_replicas": ("replicas", "répliques"),
    "word_batch": ("batch", "lot"),
    "no_deployments": ("No price list covers this configuration: add quotes with --prices.",
                       "Aucune liste de prix ne couvre cette configuration : ajoutez des devis avec --prices."),
    "deploy_assumptions": ("Assumptions of the chosen option", "Hypothèses de l'option retenue"),
    "more_rejected": ("… {n} more (--format json)", "… {n} de plus (--format json)"),
    "per_server": ("{n} per server", "{n} par serveur"),
    "x_servers": ("x {n} servers", "x {n} serveurs"),
    "stats": ("{n} configurations over {gpus} GPU types evaluated.",
              "{n} configurations évaluées sur {gpus} types de GPU."),
    "sources": (
        "Memory: gpuplan's estimator (activations from the measured table, see docs/accuracy.md). "
        "Time: gpuplan's speed model, calibrated on published runs (the reasons say when a GPU family is not "
        "calibrated). Prices: the built-in catalog and price lists, each with its source and date in the reasons "
        "and assumptions above. VRAM: the catalog's memory per GPU; the plan keeps {headroom} of it free (the "
        "project's memory headroom: constraints.memory_headroom or --headroom). These are estimates to check "
        "against a quote and a trial run.",
        "Mémoire : l'estimateur de gpuplan (activations issues de la table mesurée, voir docs/accuracy.md). "
        "Durée : le modèle de vitesse de gpuplan, calibré sur des entraînements publiés (les raisons indiquent "
        "quand une famille de GPU n'est pas calibrée). Prix : le catalogue intégré et les listes de prix, chacun "
        "avec sa source et sa date dans les raisons et hypothèses ci-dessus. VRAM : la mémoire par GPU du "
        "catalogue ; le plan en garde {headroom} libres (la marge mémoire du projet : constraints.memory_headroom "
        "ou --headroom). Ce sont des estimations à vérifier par un devis et un essai."),
    "growth_caption": (
        "Peak memory per GPU of each candidate's layout with the model as planned (×1: today's model ×{scale}, "
        "with the planned context and users growth), then 1.5 and 2 times larger again (deeper by whole layers), "
        "against the usable VRAM: the GPU's memory less the {headroom} headroom. ✓: still fits; ✗: no longer fits "
        "with this layout, and the fewest GPUs of the same type that hold it (least-memory layouts, among the "
        "server shapes the search tried). Source: gpuplan's estimator.",
        "Mémoire de pointe par GPU du parallélisme de chaque configuration avec le modèle prévu (×1 : le modèle "
        "actuel ×{scale}, avec la croissance prévue du contexte et des utilisateurs), puis 1,5 et 2 fois plus grand "
        "encore (plus profond de couches entières), face à la VRAM utilisable : la mémoire du GPU moins la marge de "
        "{headroom}. ✓ : tient encore ; ✗ : ne tient plus avec ce parallélisme, et le plus petit nombre de GPU du "
        "même type qui le tiennent (parallélismes les plus économes en mémoire, parmi les formes de serveur "
        "essayées). Source : l'estimateur de gpuplan."),
    "g_col_planned": ("×{f} as planned (model ×{scale}, {params}B parameters)",
                      "×{f} prévu (modèle ×{scale}, {params} Md de paramètres)"),
    "g_col": ("×{f} (model ×{scale}, {params}B parameters)", "×{f} (modèle ×{scale}, {params} Md de paramètres)"),
    "g_fits": ("✓ {mem} GiB", "✓ {mem} Gio"),
    "g_needs": ("✗ {mem} GiB; fits on {gpus} with the leanest layout",
                "✗ {mem} Gio ; tient sur {gpus} avec le parallélisme le plus économe"),
    "n_gpus": ("{n} GPUs", "{n} GPU"),
    "one_gpu": ("1 GPU", "1 GPU"),
    "g_no_shape": ("✗ {mem} GiB; no server shape tried holds it",
                   "✗ {mem} Gio ; aucune forme de serveur essayée ne le tient"),
    "fig_memory": ("Memory per GPU of each candidate", "Mémoire par GPU de chaque configuration"),
    "fig_memory_caption": (
        "Memory per GPU by part, per candidate; the solid mark is the GPU's VRAM, the dashed mark the usable VRAM "
        "(VRAM less the {headroom} headroom the plan keeps free). Assumptions: the plan's layout and batch. "
        "Sources: gpuplan's estimator (measured activations, docs/accuracy.md); VRAM from the catalog "
        "(memory_gib).",
        "Mémoire par GPU, par poste, pour chaque configuration ; le trait plein est la VRAM du GPU, le trait "
        "pointillé la VRAM utilisable (la VRAM moins la marge de {headroom} que le plan garde libre). Hypothèses : "
        "le parallélisme et le lot du plan. Sources : l'estimateur de gpuplan (activations mesurées, "
        "docs/accuracy.md) ; VRAM du catalogue (memory_gib)."),
    "fig_pareto": ("Time against cost", "Durée en fonction du coût"),
    "fig_pareto_caption": (
        "Each candidate's time against its cost (the cheaper of buying and renting); the line joins the Pareto "
        "front, the ring marks the recommendation. Sources: gpuplan's speed model (calibrated on published runs) "
        "and the catalog prices with their dates.",
        "Durée de chaque configuration en fonction de son coût (le moins cher de l'achat et de la location) ; la "
        "ligne relie le front de Pareto, le cercle marque la recommandation. Sources : le modèle de vitesse de "
        "gpuplan (calibré sur des entraînements publiés) et les prix du catalogue avec leurs dates."),
    "fig_pareto_skipped": ("{n} candidate(s) without a time or a cost are not drawn.",
                           "{n} configuration(s) sans durée ou sans coût ne sont pas tracées."),
    "fig_tco": ("Cumulative cost over the horizon", "Coût cumulé sur l'horizon"),
    "fig_tco_caption": (
        "Cumulative cost of each way to get the recommended configuration: upfront cost plus running cost per "
        "month (the residual value returns at the horizon, not drawn); dots mark break-even months. Sources: "
        "the deployment assumptions listed above (prices, power, staff, depreciation, each with its source).",
        "Coût cumulé de chaque façon d'obtenir la configuration recommandée : investissement initial plus coût "
        "mensuel (la valeur résiduelle revient à l'horizon, non tracée) ; les points marquent les mois de point "
        "mort. Sources : les hypothèses de déploiement listées ci-dessus (prix, énergie, personnel, "
        "amortissement, chacune avec sa source)."),
    "fig_growth": ("Memory as the model grows", "Mémoire quand le modèle grandit"),
    "fig_growth_caption": (
        "Peak memory per GPU of each candidate's layout with the model as planned (×1: today's model ×{scale}, with "
        "the growth the project plans in growth.model_scale, context_scale and users_scale), then 1.5 and 2 times "
        "larger again, against the usable VRAM (dashed: VRAM less the {headroom} headroom) and the VRAM (solid); "
        "a hatched bar no longer fits. Assumptions: the model grows by whole layers at the same width; the layout "
        "and batch stay the plan's. `gpuplan fit` gives the largest model that still fits. Sources: gpuplan's "
        "estimator; VRAM from the catalog (memory_gib).",
        "Mémoire de pointe par GPU du parallélisme de chaque configuration avec le modèle prévu (×1 : le modèle "
        "actuel ×{scale}, avec la croissance que le projet prévoit dans growth.model_scale, context_scale et "
        "users_scale), puis 1,5 et 2 fois plus grand encore, face à la VRAM utilisable (pointillés : la VRAM moins "
        "la marge de {headroom}) et à la VRAM (trait plein) ; une barre hachurée ne tient plus. Hypothèses : le "
        "modèle grandit de couches entières à largeur constante ; le parallélisme et le lot restent ceux du plan. "
        "`gpuplan fit` donne le plus grand modèle qui tient encore. Sources : l'estimateur de gpuplan ; VRAM du "
        "catalogue (memory_gib)."),
    # the latency-against-load figure of a serving plan (issue #29)
    "fig_latency": ("Latency against load", "Latence en fonction de la charge"),
    "fig_latency_caption": (
        "Time to first token, inter-token latency and end-to-end time of the recommended configuration ({replicas} "
        "replica(s), the load shared evenly) at p50 and p90 as the arrival rate rises from a light load to beyond "
        "its capacity; the dashed line is each objective at p{pct}, the vertical line the planned load, the dotted "
        "one the capacity within the objectives. Source: gpuplan's serving model (docs/serving.md), the same "
        "figures as the plan's; {arrival} arrivals.",
        "Temps jusqu'au premier jeton, latence entre jetons et durée de bout en bout de la configuration "
        "recommandée ({replicas} réplique(s), la charge partagée également) à p50 et p90 quand le débit d'arrivée "
        "croît d'une charge légère jusqu'au-delà de sa capacité ; la ligne tiretée est chaque objectif à p{pct}, "
        "la verticale la charge prévue, la pointillée la capacité dans les objectifs. Source : le modèle de "
        "service de gpuplan (docs/serving.md), les mêmes chiffres que le plan ; arrivées {arrival}."),
    "arrival_poisson": ("Poisson", "de Poisson"),
    "arrival_constant": ("evenly spaced", "régulières"),
    "ax_rate": ("arrival rate (requests/s)", "débit d'arrivée (requêtes/s)"),
    "ax_seconds": ("seconds", "secondes"),
    "p_ttft": ("time to first token", "premier jeton"),
    "p_itl": ("inter-token latency", "latence entre jetons"),
    "p_e2e": ("end to end", "de bout en bout"),
    "l_objective": ("objective (p{pct})", "objectif (p{pct})"),
    "l_planned_load": ("planned load", "charge prévue"),
    "l_capacity": ("capacity", "capacité"),
    "no_data": ("no data to draw", "aucune donnée à tracer"),
    "ax_gib": ("GiB per GPU", "Gio par GPU"),
    "ax_cost": ("cost ({currency})", "coût ({currency})"),
    "ax_time_h": ("time (hours)", "durée (heures)"),
    "ax_latency": ("request latency (s)", "latence par requête (s)"),
    "ax_month": ("month", "mois"),
    "ax_cumulative": ("cumulative cost ({currency})", "coût cumulé ({currency})"),
    "l_vram": ("VRAM", "VRAM"),
    "l_usable": ("usable VRAM", "VRAM utilisable"),
    "l_planned": ("×1 (as planned)", "×1 (prévu)"),
    "l_factor": ("×{f}", "×{f}"),
    "l_no_fit": ("no longer fits", "ne tient plus"),
    "l_pareto": ("Pareto front", "front de Pareto"),
    "l_recommended": ("recommended", "recommandée"),
    "l_breakeven": ("break-even", "point mort"),
    "m_weights": ("weights", "poids"),
    "m_reference": ("reference model", "modèle de référence"),
    "m_rollout": ("rollout engine", "moteur de génération"),
    "m_gradients": ("gradients", "gradients"),
    "m_optimizer": ("optimizer", "optimiseur"),
    "m_activations": ("activations", "activations"),
    "m_kv_cache": ("KV cache", "cache KV"),
    "m_other": ("other", "autres"),
    "m_rest": ("peak and allocator", "pic et allocateur"),
    # ---- the terminal (report/terminal.py)
    "tx_rule": ("gpuplan plan: {project} (objective: {objective})",
                "gpuplan plan : {project} (objectif : {objective})"),
    "tx_instead": ("If you buy or rent instead", "Si vous achetez ou louez plutôt"),
    "tx_thin": ("No candidate has adequate evidence; the best of what qualifies: ",
                "Aucune configuration n'a de preuves suffisantes ; la meilleure de celles qui conviennent : "),
    "tx_get": ("Get", "Prendre"),
    "tx_no_price": ("no price list covers this configuration (add quotes with --prices)",
                    "aucune liste de prix ne couvre cette configuration (ajoutez des devis avec --prices)"),
    "tx_deploy": ("deploy {option} ({provider}): {cost}", "déploiement {option} ({provider}) : {cost}"),
    "tx_request": (" A request takes {s} s.", " Une requête prend {s} s."),
    "tx_no_length": (" {time} (the project gives no training length).",
                     " {time} (le projet ne donne pas de durée d'entraînement)."),
    "tx_server": ("Server", "Serveur"),
    "tx_server_line": ("{servers} × {platform}{rack}, price {price}", "{servers} × {platform}{rack}, prix {price}"),
    "tx_gpu_line": ("{gpus} × {gpu} ({gpu_id}) per server, {layout}",
                    "{gpus} × {gpu} ({gpu_id}) par serveur, {layout}"),
    "tx_spec": ("{sockets} × {cpu} ({cores} cores) · RAM {ram} · NVMe {tb} TB ({drives}, {read} GB/s) · "
                "network {net} Gb/s · {kw} kW · {btu} BTU/h ({cooling})",
                "{sockets} × {cpu} ({cores} cœurs) · RAM {ram} · NVMe {tb} To ({drives}, {read} Go/s) · "
                "réseau {net} Gb/s · {kw} kW · {btu} BTU/h ({cooling})"),
    "tx_drive": ("{n} drive", "{n} disque"),
    "tx_drives": ("{n} drives", "{n} disques"),
    "tx_ram": ("{n} GB", "{n} Go"),
    "tx_memory": ("Memory per GPU", "Mémoire par GPU"),
    "tx_memory_line": ("  {dev}{of} GiB at the peak ({phase}; largest: {dominant}); {grown} after growth",
                       "  {dev}{of} Gio au pic ({phase} ; poste le plus gros : {dominant}) ; {grown} après croissance"),
    "tx_of": (" of {v}", " sur {v}"),
    "tx_temporaries": ("temporaries", "temporaires"),
    "tx_reserve": ("allocator reserve", "réserve de l'allocateur"),
    "tx_context": ("CUDA context", "contexte CUDA"),
    "tx_free": ("{glyph} free {gib} GiB, {pct}", "{glyph} libre {gib} Gio, {pct}"),
    "tx_kept": ("{glyph} of which the plan keeps {gib} GiB ({pct} headroom)",
                "{glyph} dont {gib} Gio que le plan garde libres ({pct} de marge)"),
    "tx_alternatives": ("Alternatives (best {shown} of {kept}; → recommended, * Pareto{thin}; GPUs: per server × "
                        "servers)",
                        "Alternatives (les {shown} meilleures sur {kept} ; → recommandée, * Pareto{thin} ; GPU : par "
                        "serveur × serveurs)"),
    "tx_alternatives_one": ("Alternatives (best {shown} of {kept}; → recommended, * Pareto{thin}; GPUs: per server × "
                            "servers)",
                            "Alternatives (la meilleure sur {kept} ; → recommandée, * Pareto{thin} ; GPU : par serveur "
                            "× serveurs)"),
    "tx_thin_mark": ("; ? evidence not adequate, ranked last", " ; ? preuves insuffisantes, classée en dernier"),
    "tx_col_gpus": ("GPUs", "nombre"),
    "tx_col_gib": ("GiB", "Gio"),
    "tx_col_cost": ("cost {currency}", "coût {currency}"),
    "tx_basis_rent": ("rent", "location"),
    "tx_basis_buy": ("buy", "achat"),
    "tx_ranked": ("cost as ranked: the cheapest way of getting it over the horizon, buying (with power, hosting, "
                  "support and staff, less resale) or renting (median price)",
                  "coût classé : la façon la moins chère de l'obtenir sur l'horizon, l'achat (avec l'électricité, "
                  "l'hébergement, le support et le personnel, moins la revente) ou la location (prix médian)"),
    "tx_ranked_cost": ("; within 10% of the cheapest (or 1% of the budget) is equal, then fewer GPUs, then faster",
                       " ; à 10 % près du moins cher (ou à 1 % du budget près), égalité, puis moins de GPU, puis plus "
                       "rapide"),
    "tx_deployments": ("Deployment costs (→ chosen)", "Coûts de déploiement (→ retenue)"),
    "tx_deployments_narrow": ("Deployment costs (→ chosen; more: --format md)",
                              "Coûts de déploiement (→ retenue ; plus : --format md)"),
    "tx_col_cheaper": ("cheaper than", "moins chère que"),
    "tx_no_deployments": ("Deployment costs: no price list covers this configuration (add quotes with --prices).",
                          "Coûts de déploiement : aucune liste de prix ne couvre cette configuration (ajoutez des "
                          "devis avec --prices)."),
    "tx_every_reason": (" (every reason with --details)", " (toutes les raisons avec --details)"),
    "tx_questions": ("Questions", "Questions"),
    "tx_rules": ("The server, rule by rule", "Le serveur, règle par règle"),
    "tx_foot": ("{n} configurations over {gpus} GPU types in {s} s",
                "{n} configurations sur {gpus} types de GPU en {s} s"),
    "tx_foot_rejected": ("; {n} GPU types not chosen", " ; {n} types de GPU écartés"),
    "tx_foot_details": ("; --details: the server's rules, every reason, the GPUs not chosen and why",
                        " ; --details : les règles du serveur, toutes les raisons, les GPU écartés et pourquoi"),
    "tx_no_recommendation": ("No recommendation: no candidate meets the project.",
                             "Aucune recommandation : aucune configuration ne satisfait le projet."),
    # ---- the web page's summary (web/summary.py, POST /api/summary)
    "s_gpus": ("GPUs", "GPU"),
    "s_in_servers": (" in each of {n} servers", " dans chacun des {n} serveurs"),
    "s_server": ("{platform}: {sockets} x {cpu} ({cores} cores), {ram} GB RAM, {tb} TB NVMe",
                 "{platform} : {sockets} x {cpu} ({cores} cœurs), {ram} Go de RAM, {tb} To de NVMe"),
    "s_memory": ("{now} GiB now, {grown} GiB after the planned growth ({dominant} dominate)",
                 "{now} Gio aujourd'hui, {grown} Gio après la croissance prévue (surtout : {dominant})"),
    "s_price": ("Hardware price", "Prix du matériel"),
    "s_price_if_buy": ("If you buy: hardware price", "En cas d'achat : prix du matériel"),
    "s_power": ("Power and cooling", "Électricité et refroidissement"),
    "s_power_value": ("{kw} kW, {btu} BTU/h ({cooling})", "{kw} kW, {btu} BTU/h ({cooling})"),
    "s_deployment": ("Deployment", "Déploiement"),
    "s_deployment_value": ("{option} ({provider}): {total} over the horizon, {monthly}/month",
                           "{option} ({provider}) : {total} sur l'horizon, {monthly}/mois"),
    "s_ranked": (" (ranked by {objective})", " (classement : {objective})"),
}


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise InputError(["--lang"], f"no report language {lang!r}", ", ".join(LANGS))
    return lang


def t(key: str, lang: str = "en", **fields: object) -> str:
    """The report string `key` in `lang` ("en" or "fr"), with `fields` filled in."""
    text = STRINGS[key][LANGS.index(check_lang(lang))]
    return text.format(**fields) if fields else text


__all__ = ["LANGS", "STRINGS", "check_lang", "t"]
