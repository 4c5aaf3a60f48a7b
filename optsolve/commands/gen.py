"""The ``optsolve gen KIND`` command: each family's parameters become its options."""

from __future__ import annotations

import json
import os
import sys

import click

from optsolve.core.generate import Param, check_budget


def _click_type(p: Param):
    if isinstance(p.type, tuple):
        return click.Choice(p.type)
    return p.type


def make_gen_command(kind: str) -> click.Command:
    from optsolve.core.registry import solver_module

    families = solver_module(kind, "problems").FAMILIES
    users: dict[str, list[str]] = {}
    specs: dict[str, Param] = {}
    for fam in families.values():
        for p in fam.params:
            users.setdefault(p.name, []).append(fam.name)
            specs.setdefault(p.name, p)

    def callback(family, seed, output, **given):
        import numpy as np

        from optsolve.cli import check_writable
        from optsolve.core.files import EXTENSIONS, save_problem

        check_writable(output, "'-o' / '--output'")
        if output != "-" and os.path.splitext(output)[1].lower() not in EXTENSIONS:
            raise click.BadParameter(f"{output!r} has an unknown extension; expected one of {', '.join(EXTENSIONS)} "
                                     "(or '-' for JSON on stdout).", param_hint="'-o' / '--output'")
        fam = families[family]
        own = {p.name for p in fam.params}
        extra = [name for name, v in given.items() if v is not None and name not in own]
        if extra:
            raise click.UsageError(f"Option '--{extra[0].replace('_', '-')}' does not apply to family "
                                   f"{family!r} (it takes: {', '.join('--' + n.replace('_', '-') for n in sorted(own)) or 'no options'}).")
        values = fam.defaults()
        values.update({k: v for k, v in given.items() if v is not None})
        try:
            check_budget(fam, values, {k: v for k, v in given.items() if v is not None})
            data = fam.generate(np.random.default_rng(seed), **values)
        except ValueError as exc:  # a combination of options the family cannot make
            raise click.UsageError(str(exc)) from None
        except (ArithmeticError, IndexError, MemoryError, RecursionError) as exc:
            shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items() if v is not None)
            raise click.UsageError(f"family {family!r} cannot be generated with {shown or 'its defaults'} "
                                   f"({type(exc).__name__}: {exc or 'a size out of range'}).") from None
        if output == "-":  # the JSON form, which `optsolve KIND -` reads on stdin
            from optsolve.core.files import _json_value

            sys.stdout.write(json.dumps({k: _json_value(v) for k, v in data.items()}) + "\n")
            sys.stdout.flush()
        else:
            save_problem(output, data)
        where = "stdout (JSON)" if output == "-" else output
        sys.stderr.write(f"optsolve gen {kind}: wrote {where} (family {family}, seed {seed}, "
                         + ", ".join(f"{k}={v}" for k, v in values.items()) + ")\n")

    params = [
        click.Option(["--family"], type=click.Choice(sorted(families)), required=True,
                     help="; ".join(f"{f.name}: {f.help}" for f in families.values())),
        click.Option(["--seed"], type=int, default=0, show_default=True, help="Random seed."),
        click.Option(["-o", "--output"], required=True, metavar="FILE|-",
                     help="Problem file to write (.npz, .json or .mat; '-' for JSON on stdout)."),
    ]
    for name, p in specs.items():
        defaults = {fam: families[fam].defaults()[name] for fam in users[name]}
        if len(set(map(repr, defaults.values()))) == 1:
            which = f"families: {', '.join(users[name])}; default {p.default}"
        else:
            which = "default " + ", ".join(f"{v} for {fam}" for fam, v in defaults.items())
        params.append(click.Option([f"--{name.replace('_', '-')}", name], type=_click_type(p), default=None,
                                   help=f"{p.help} ({which})"))
    return click.Command(kind, params=params, callback=callback,
                         help=f"Generate a problem file for 'optsolve {kind}'.")
