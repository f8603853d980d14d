"""The launch wizard's forms."""

import shlex

from django import forms
from django.utils.translation import gettext_lazy as _

from core.errors import ServiceError
from core.field_errors import FieldError

from .choices import SPEC_CARD_COUNTS, Backend, TermEnd
from .choosing import AUTO
from .environment import check_boot_options, parse_env_lines
from .images import boot_root, compatible_images, family_warning, other_family_images
from .launching import LaunchRequest, _check_shutdown
from .models import Secret

# The launch wizard ---------------------------------------------------------------------------------------------


def _select(**attrs):
    return forms.Select(attrs={"class": "form-select", **attrs})


def _code_area(placeholder: str):
    attrs = {"class": "form-control font-monospace", "rows": 3, "spellcheck": "false", "placeholder": placeholder}
    return forms.Textarea(attrs=attrs)


# The wizard's advanced section: neither changes the price, and the wizard keeps them out of its price form.
ADVANCED_FIELDS = ("start_command", "env", "secrets")

# Auto-shutdown, in the wizard and on the instance page: both optional, checked by the service's own rule.
DATETIME_LOCAL = "%Y-%m-%dT%H:%M"


def _auto_shutdown_at_field():
    return forms.DateTimeField(
        label=_("Shut down at"),
        required=False,
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
        error_messages={"invalid": _("Enter a date and time, e.g. 2026-12-31 18:00.")},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "class": "form-control"}, format=DATETIME_LOCAL),
    )


def _idle_shutdown_field():
    return forms.IntegerField(
        label=_("Shut down after idle minutes"),
        required=False,
        error_messages={"invalid": _("Enter a whole number of minutes.")},
        widget=forms.NumberInput(attrs={"class": "form-control", "min": 5, "max": 7 * 24 * 60, "placeholder": "30"}),
    )


def _check_auto_shutdown(form, data: dict) -> None:
    """Put the service's refusals (a time in the past, idle minutes out of range) next to their fields."""
    checks = {
        "auto_shutdown_at": (data.get("auto_shutdown_at"), None),
        "idle_shutdown_minutes": (None, data.get("idle_shutdown_minutes")),
    }
    for name, (at, idle_minutes) in checks.items():
        try:
            _check_shutdown(at, idle_minutes)
        except ServiceError as exc:
            form.add_error(name, str(exc.message))


class AutoShutdownForm(forms.Form):
    """Change or clear a running instance's auto-shutdown (empty fields clear it)."""

    auto_shutdown_at = _auto_shutdown_at_field()
    idle_shutdown_minutes = _idle_shutdown_field()

    def clean(self):
        data = super().clean()
        _check_auto_shutdown(self, data)
        return data


class LaunchForm(forms.Form):
    """zone → chip or backend family → cards → image → plan/spot → name. Choices narrow as the user picks; the
    service decides everything else (and says why it refuses)."""

    zone = forms.ChoiceField(label=_("Zone"), required=False, widget=_select())
    backend = forms.ChoiceField(label=_("Backend family"), required=False, widget=_select())
    chip = forms.ChoiceField(label=_("Chip"), required=False, widget=_select())
    no_card = forms.BooleanField(label=_("No-card mode (CPU only)"), required=False)
    cards = forms.TypedChoiceField(
        label=_("Cards"), coerce=int, choices=[(c, c) for c in SPEC_CARD_COUNTS], initial=1, widget=_select()
    )
    image = forms.ChoiceField(
        label=_("Image"),
        widget=_select(),
        error_messages={
            "invalid_choice": _("The image “%(value)s” does not run on the chosen chip; choose one of those listed.")
        },
    )
    plan = forms.ChoiceField(label=_("Plan"), widget=_select())
    # xgettext:no-python-format
    spot = forms.BooleanField(label=_("Spot (preemptible, 40% off)"), required=False)
    wait_for_card = forms.BooleanField(
        label=_("Wait for a card"),
        required=False,
        help_text=_(
            "When no card is free, wait in the queue and start as soon as one frees (you are notified), instead of "
            "being refused. It leaves the queue if your balance can no longer pay its first hour."
        ),
    )
    term_end_action = forms.ChoiceField(
        label=_("When a prepaid term ends"),
        choices=TermEnd.choices,
        initial=TermEnd.CONTINUE,
        required=False,
        widget=_select(),
    )
    name = forms.CharField(
        label=_("Name"), max_length=64, widget=forms.TextInput(attrs={"class": "form-control", "autocomplete": "off"})
    )
    # A new data disk and hub mounts (the wizard's search box fills ``mounts``).
    data_disk_gb = forms.IntegerField(
        label=_("Data disk (GB, 0 for none)"),
        required=False,
        min_value=0,
        max_value=32 * 1024,
        error_messages={"invalid": _("Enter a whole number of GB.")},
        widget=forms.NumberInput(attrs={"class": "form-control", "min": 0}),
    )
    mounts = forms.CharField(
        label=_("Hub models and datasets to mount (org/name, comma-separated)"),
        required=False,
        max_length=4000,
        widget=forms.TextInput(attrs={"class": "form-control", "autocomplete": "off"}),
    )
    auto_shutdown_at = _auto_shutdown_at_field()
    idle_shutdown_minutes = _idle_shutdown_field()
    # Advanced: what the machine boots with (instances.environment checks them, for the API alike).
    start_command = forms.CharField(
        label=_("Start command"),
        required=False,
        strip=False,
        help_text=_("Run with /bin/sh -c at every boot; its output is the instance's logs. Empty: the image's own."),
        widget=_code_area("python train.py --epochs 3"),
    )
    env = forms.CharField(
        label=_("Environment variables"),
        required=False,
        strip=False,
        help_text=_("One NAME=value per line; the value is taken as written. Not secret: shown on the instance page."),
        widget=_code_area("HF_ENDPOINT=https://hf-mirror.com"),
    )
    secrets = forms.MultipleChoiceField(
        label=_("Secrets"),
        required=False,
        help_text=_("Given to the instance as environment variables of the same name; their values are never shown."),
        error_messages={"invalid_choice": _("You have no secret named %(value)s.")},
        widget=forms.CheckboxSelectMultiple(attrs={"class": "form-check-input"}),
    )

    def __init__(self, *args, zones, chips, plans, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        data = self.data
        self.fields["zone"].choices = [("", _("Any zone (Xinchuang zone first)"))] + [(z.slug, z.label) for z in zones]
        auto = [(AUTO, _("Cheapest per unit of work (auto)"))]
        self.fields["backend"].choices = [("", _("Any family"))] + list(Backend.choices) + auto
        family = data.get("backend") or ""
        chip_label = _("Cheapest with free cards") if family else _("Choose a chip")
        if family == AUTO:
            family = ""  # every chip the image runs on is a candidate
            chip_label = _("Picked for you: the cheapest per unit of work")
        offered = [c for c in chips if not family or c.backend == family]
        self.fields["chip"].choices = [("", chip_label)] + [(c.slug, c.label) for c in offered]
        chosen = next((c for c in chips if c.slug == data.get("chip")), None)
        image_family = None if data.get("no_card") else (chosen.backend if chosen else family or None)
        if image_family is None and not data.get("no_card") and offered:
            image_family = offered[0].backend
        # The marketplace's variants for the chip's family, the user's own images included; then the user's imported
        # images built for another family, which boot here too but are marked (the page says why under the list).
        self.image_family = image_family
        self.fields["image"].choices = [(v.slug, v.choice_label) for v in compatible_images(image_family, user)] + [
            (v.slug, _("%(image)s (for %(family)s)") % {"image": v.choice_label, "family": v.family_label})
            for v in other_family_images(image_family, user)
        ]
        self.fields["plan"].choices = [(p.slug, p.label) for p in plans]
        self.user = user
        names = Secret.objects.for_user(user).values_list("name", flat=True) if user is not None else []
        self.fields["secrets"].choices = [(name, name) for name in names]

    @property
    def image_warning(self) -> str:
        """Why the chosen image may not use the chosen card (an imported image built for another chip family)."""
        return family_warning(self.data.get("image") or "", self.image_family)

    @property
    def image_command(self) -> str:
        """An imported image's own command (its ENTRYPOINT and CMD), which the machine runs when the start command is
        left empty; "" for other images."""
        config = boot_root(self.data.get("image") or "")
        if not config:
            return ""
        return shlex.join([*(config.get("entrypoint") or []), *(config.get("cmd") or [])])

    @property
    def advanced_open(self) -> bool:
        """The wizard's advanced section stays open while it holds something (an error is always about something)."""
        return self.is_bound and any(self.data.get(name) for name in ADVANCED_FIELDS)

    def clean_env(self):
        try:
            return parse_env_lines(self.cleaned_data["env"])
        except FieldError as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from exc

    def clean(self):
        data = super().clean()
        _check_auto_shutdown(self, data)
        self._check_boot(data)
        return data

    def _check_boot(self, data: dict) -> None:
        """Put the service's refusals of the start command, variables and secrets next to their fields."""
        if self.user is None or any(name in self.errors for name in ADVANCED_FIELDS):
            return
        try:
            check_boot_options(
                self.user,
                start_command=data.get("start_command"),
                env=data.get("env"),
                secret_names=data.get("secrets"),
            )
        except FieldError as exc:
            self.add_error(exc.field if exc.field in ADVANCED_FIELDS else None, str(exc.message))

    def launch_request(self):
        data = self.cleaned_data
        return LaunchRequest(
            name=data["name"],
            image=data["image"],
            chip="" if data["no_card"] else data["chip"],
            backend="" if data["no_card"] or data["chip"] else data["backend"],
            no_card=data["no_card"],
            cards=0 if data["no_card"] else data["cards"],
            zone=data["zone"],
            plan=data["plan"],
            spot=data["spot"],
            term_end_action=data["term_end_action"] or TermEnd.CONTINUE,
            data_disk_gb=data.get("data_disk_gb") or 0,
            mounts=data.get("mounts") or "",
            auto_shutdown_at=data.get("auto_shutdown_at"),
            idle_shutdown_minutes=data.get("idle_shutdown_minutes"),
            start_command=data.get("start_command") or "",
            env=data.get("env") or {},
            secrets=tuple(data.get("secrets") or ()),
        )


# Secrets (the account's secrets page) ---------------------------------------------------------------------------


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value: a secret's value goes in and is never sent back, even beside an
    error."""

    def format_value(self, value):
        return None


def _secret_value_field():
    return forms.CharField(
        label=_("Value"),
        strip=False,
        error_messages={"required": _("Give the secret a value.")},
        help_text=_("Kept encrypted; it is never shown again, here or anywhere else."),
        widget=WriteOnlyTextarea(
            attrs={"class": "form-control font-monospace", "rows": 2, "autocomplete": "off", "spellcheck": "false"}
        ),
    )


class SecretValueForm(forms.Form):
    value = _secret_value_field()

    def clean_value(self):
        # A browser sends a textarea's line ends as CR LF; a pasted key or certificate means LF.
        return self.cleaned_data["value"].replace("\r\n", "\n")


class SecretForm(SecretValueForm):
    name = forms.CharField(
        label=_("Name"),
        max_length=200,
        help_text=_("The environment variable it becomes, e.g. HF_TOKEN: letters, digits and underscores."),
        error_messages={"required": _("Give the secret a name.")},
        widget=forms.TextInput(attrs={"class": "form-control font-monospace", "autocomplete": "off"}),
    )
    field_order = ["name", "value"]


class DailyPowerForm(forms.Form):
    """An instance's daily stop and start times; an empty time is off."""

    stop_at = forms.TimeField(
        label=_("Stop daily at"),
        required=False,
        widget=forms.TimeInput(attrs={"type": "time", "class": "form-control"}),
    )
    start_at = forms.TimeField(
        label=_("Start daily at"),
        required=False,
        widget=forms.TimeInput(attrs={"type": "time", "class": "form-control"}),
    )
    timezone = forms.CharField(
        label=_("Time zone"),
        required=False,
        initial="Asia/Shanghai",
        widget=forms.TextInput(attrs={"class": "form-control"}),
    )
