"""Django settings of the test OpenID provider: everything from the environment ``OidcProvider`` gives it."""

import os
from pathlib import Path

DATA_DIR = Path(os.environ["OIDC_PROVIDER_DATA_DIR"])
SITE_URL = os.environ["OIDC_PROVIDER_SITE_URL"]
SECRET_KEY = "test-provider-" + os.environ.get("OIDC_PROVIDER_SECRET", "not-for-production")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [str(Path(__file__).parent / "templates")],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                       "django.contrib.auth.context_processors.auth",
                                       "django.contrib.messages.context_processors.messages"]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / "provider.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
OIDC_IDTOKEN_EXPIRE = int(os.environ.get("OIDC_PROVIDER_IDTOKEN_EXPIRE_S", "600"))
OIDC_IDTOKEN_PROCESSING_HOOK = "tests.support.oidc_provider.claims.add_claims"
LOGGING = {"version": 1, "handlers": {"console": {"class": "logging.StreamHandler"}},
           "loggers": {"oidc_provider": {"handlers": ["console"], "level": "DEBUG"}}}
