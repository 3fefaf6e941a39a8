"""The RAG evaluation set: 20 short documents written for this project, in mixed formats, and
40 questions, each with the document and a phrase of the passage that answers it.

Half of the questions are paraphrases that share few or no content words with their answer
(marked ``paraphrase=True``). Documents are kept as text here and rendered to their format
(PDF, DOCX, HTML, Markdown, CSV, JSON, text) by :func:`render`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

Kind = Literal["pdf", "docx", "html", "md", "txt", "csv", "json"]

MIME = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "md": "text/markdown",
    "txt": "text/plain",
    "csv": "text/csv",
    "json": "application/json",
}


@dataclass(frozen=True)
class Document:
    name: str
    kind: Kind
    sections: list[tuple[str, str]]
    """(heading, text); one page per section for PDFs."""


@dataclass(frozen=True)
class Question:
    text: str
    filename: str
    phrase: str
    """A phrase of the answering passage (case-insensitive)."""
    paraphrase: bool = False


DOCUMENTS = [
    Document(
        "bakery.pdf",
        "pdf",
        [
            (
                "Opening hours",
                "The Rue Verte bakery opens at six in the morning and closes at seven in the evening, except on Mondays when it stays shut.",
            ),
            (
                "Sourdough",
                "Our sourdough loaf rests for thirty-six hours before baking; the starter was begun in 1998 and is fed twice a day with rye flour.",
            ),
        ],
    ),
    Document(
        "heat_pump.docx",
        "docx",
        [
            (
                "Installation",
                "The heat pump outdoor unit must stand at least thirty centimetres from any wall so that air can circulate freely.",
            ),
            (
                "Maintenance",
                "Clean the filters every three months; a clogged filter raises electricity use by up to fifteen percent.",
            ),
        ],
    ),
    Document(
        "cycling_club.md",
        "md",
        [
            (
                "Sunday rides",
                "The club's Sunday ride leaves the town hall at eight sharp and covers about ninety kilometres through the hills.",
            ),
            (
                "Membership",
                "Annual membership costs forty euros and includes insurance for accidents during club rides.",
            ),
        ],
    ),
    Document(
        "lighthouse.html",
        "html",
        [
            (
                "History",
                "The Kerbrat lighthouse was lit for the first time in 1874; its lamp burned rapeseed oil until electricity arrived in 1931.",
            ),
            (
                "Visits",
                "Visitors may climb the 212 steps to the gallery between April and October; children under eight must hold an adult's hand.",
            ),
        ],
    ),
    Document(
        "payroll_policy.txt",
        "txt",
        [
            ("Pay dates", "Salaries are paid on the last working day of each month by bank transfer."),
            (
                "Expenses",
                "Travel expenses must be claimed within sixty days with the original receipts attached, or they are not reimbursed.",
            ),
        ],
    ),
    Document(
        "greenhouse_sensors.csv",
        "csv",
        [
            (
                "sensors",
                "sensor,location,measures,alarm\nS1,north bench,humidity,above 90 percent\nS2,south bench,temperature,above 35 degrees\nS3,roof vent,wind speed,above 60 km/h",
            ),
        ],
    ),
    Document(
        "release_notes.json",
        "json",
        [
            (
                "releases",
                json.dumps(
                    {
                        "2.4": "Adds dark mode and fixes the crash when exporting large spreadsheets.",
                        "2.5": "Drops support for the old 32-bit installer; synchronisation is now three times faster.",
                    }
                ),
            ),
        ],
    ),
    Document(
        "volcano_notes.pdf",
        "pdf",
        [
            (
                "Eruption",
                "Mount Ardan last erupted in 1912; ash fell on villages forty kilometres to the east for nine days.",
            ),
            (
                "Monitoring",
                "Seismometers around the crater send readings every ten seconds to the observatory in the valley.",
            ),
        ],
    ),
    Document(
        "dog_training.docx",
        "docx",
        [
            (
                "Recall",
                "To teach recall, call the puppy's name once, crouch down, and reward it with a treat the moment it reaches you.",
            ),
            ("Leash", "Stop walking whenever the leash goes tight; start again only when it is slack."),
        ],
    ),
    Document(
        "school_trip.md",
        "md",
        [
            (
                "Departure",
                "The coach for the museum trip leaves the school gate at 7:45; pupils must bring a packed lunch and a raincoat.",
            ),
            ("Cost", "The trip costs twelve euros per pupil, payable to the school office before Friday."),
        ],
    ),
    Document(
        "wine_cellar.html",
        "html",
        [
            (
                "Storage",
                "Bottles are stored lying down at a steady thirteen degrees so that the cork stays moist.",
            ),
            ("Tasting", "Tastings take place on Saturday afternoons and must be booked two days ahead."),
        ],
    ),
    Document(
        "server_runbook.txt",
        "txt",
        [
            (
                "Disk full",
                "When the database disk is over ninety percent full, rotate the logs first, then delete backups older than two weeks.",
            ),
            (
                "Restart",
                "Restart the API service with the deploy script, never by killing the process by hand, so that connections drain.",
            ),
        ],
    ),
    Document(
        "library_rules.pdf",
        "pdf",
        [
            (
                "Loans",
                "Members may borrow up to six books at once for three weeks; a loan can be renewed twice online.",
            ),
            ("Late returns", "Late returns cost twenty cents per book per day, capped at five euros."),
        ],
    ),
    Document(
        "solar_panels.docx",
        "docx",
        [
            (
                "Output",
                "Our twelve roof panels produce about 4,200 kilowatt-hours a year, roughly the needs of a family of four.",
            ),
            (
                "Cleaning",
                "Rain cleans the panels well enough; hosing them down once a year in summer removes pollen.",
            ),
        ],
    ),
    Document(
        "chess_tournament.md",
        "md",
        [
            (
                "Format",
                "The tournament plays seven rounds of Swiss system with ninety minutes per player plus thirty seconds per move.",
            ),
            ("Prizes", "The winner receives three hundred euros and the best junior gets a set of books."),
        ],
    ),
    Document(
        "ferry_timetable.csv",
        "csv",
        [
            (
                "ferries",
                "route,first departure,last departure,crossing time\nPort Lenn to Isle Mor,06:30,21:15,50 minutes\nIsle Mor to Port Lenn,07:40,22:20,50 minutes",
            ),
        ],
    ),
    Document(
        "recipe_soup.html",
        "html",
        [
            (
                "Ingredients",
                "Pumpkin soup needs one kilo of pumpkin, two onions, a litre of stock and a spoon of nutmeg.",
            ),
            (
                "Method",
                "Simmer the vegetables for twenty-five minutes, then blend until smooth and add cream just before serving.",
            ),
        ],
    ),
    Document(
        "hr_leave.json",
        "json",
        [
            (
                "leave",
                json.dumps(
                    {
                        "parental_leave": "Parents receive sixteen weeks of paid leave after a birth or adoption.",
                        "sick_leave": "A doctor's note is required from the third day of absence due to illness.",
                    }
                ),
            ),
        ],
    ),
    Document(
        "beekeeping.txt",
        "txt",
        [
            (
                "Honey harvest",
                "We harvest honey in late August, leaving at least fifteen kilos in each hive for the bees to eat over winter.",
            ),
            (
                "Swarming",
                "Bees tend to swarm in May when the hive gets crowded; adding a box of empty frames gives them room.",
            ),
        ],
    ),
    Document(
        "museum_guide.pdf",
        "pdf",
        [
            (
                "Collections",
                "The east wing holds the Roman mosaics; the west wing shows paintings from the nineteenth century.",
            ),
            (
                "Accessibility",
                "Wheelchairs can be borrowed free of charge at the entrance, and every floor is served by a lift.",
            ),
        ],
    ),
]

QUESTIONS = [
    Question("When does the Rue Verte bakery open?", "bakery.pdf", "opens at six"),
    Question(
        "How long does the bread dough ferment before it goes in the oven?",
        "bakery.pdf",
        "thirty-six hours",
        True,
    ),
    Question(
        "How far from the wall must the heat pump outdoor unit be?", "heat_pump.docx", "thirty centimetres"
    ),
    Question(
        "What happens to my power bill if I never wash the air screens?",
        "heat_pump.docx",
        "fifteen percent",
        True,
    ),
    Question("What time does the Sunday ride leave?", "cycling_club.md", "eight sharp"),
    Question("How much is it to join the bike group for a year?", "cycling_club.md", "forty euros", True),
    Question("When was the Kerbrat lighthouse first lit?", "lighthouse.html", "1874"),
    Question(
        "Can small kids go up to the top of the tower?", "lighthouse.html", "children under eight", True
    ),
    Question("When are salaries paid?", "payroll_policy.txt", "last working day"),
    Question(
        "What is the deadline to get reimbursed for a business trip?",
        "payroll_policy.txt",
        "sixty days",
        True,
    ),
    Question("Which sensor measures humidity on the north bench?", "greenhouse_sensors.csv", "humidity"),
    Question(
        "At what gust strength does the alarm at the top opening go off?",
        "greenhouse_sensors.csv",
        "60 km/h",
        True,
    ),
    Question("Which release adds dark mode?", "release_notes.json", "dark mode"),
    Question(
        "In which version did syncing get much quicker?", "release_notes.json", "three times faster", True
    ),
    Question("When did Mount Ardan last erupt?", "volcano_notes.pdf", "1912"),
    Question(
        "How often does the observatory get ground-shaking data?",
        "volcano_notes.pdf",
        "every ten seconds",
        True,
    ),
    Question("How do I teach my puppy recall?", "dog_training.docx", "crouch down"),
    Question(
        "My dog keeps pulling on walks, what should I do?", "dog_training.docx", "leash goes tight", True
    ),
    Question("What time does the coach for the museum trip leave?", "school_trip.md", "7:45"),
    Question("How much do parents pay for the outing?", "school_trip.md", "twelve euros", True),
    Question("At what temperature are the bottles stored?", "wine_cellar.html", "thirteen degrees"),
    Question(
        "How far in advance must I reserve a spot to sample wines?",
        "wine_cellar.html",
        "two days ahead",
        True,
    ),
    Question(
        "What to do when the database disk is over ninety percent full?",
        "server_runbook.txt",
        "rotate the logs",
    ),
    Question(
        "Is it fine to kill -9 the backend to bounce it?", "server_runbook.txt", "never by killing", True
    ),
    Question("How many books can members borrow at once?", "library_rules.pdf", "six books"),
    Question(
        "What is the fine for bringing a novel back after the due date?",
        "library_rules.pdf",
        "twenty cents",
        True,
    ),
    Question("How many kilowatt-hours do the roof panels produce a year?", "solar_panels.docx", "4,200"),
    Question("Do the photovoltaic modules need washing?", "solar_panels.docx", "rain cleans", True),
    Question("How many rounds does the chess tournament have?", "chess_tournament.md", "seven rounds"),
    Question("What does the champion take home?", "chess_tournament.md", "three hundred euros", True),
    Question("When is the first ferry from Port Lenn to Isle Mor?", "ferry_timetable.csv", "06:30"),
    Question("How long is the boat crossing to the island?", "ferry_timetable.csv", "50 minutes", True),
    Question("What ingredients does pumpkin soup need?", "recipe_soup.html", "one kilo of pumpkin"),
    Question("How long should it cook before I puree it?", "recipe_soup.html", "twenty-five minutes", True),
    Question("How many weeks of parental leave do parents receive?", "hr_leave.json", "sixteen weeks"),
    Question("When do I need a medical certificate for being ill?", "hr_leave.json", "third day", True),
    Question("When do we harvest honey?", "beekeeping.txt", "late august"),
    Question("How can I stop a colony from leaving in spring?", "beekeeping.txt", "empty frames", True),
    Question("Where are the Roman mosaics in the museum?", "museum_guide.pdf", "east wing"),
    Question("Can someone in a wheelchair get to the upper galleries?", "museum_guide.pdf", "lift", True),
]


def render(document: Document) -> bytes:
    """The document's bytes in its format."""
    if document.kind == "pdf":
        from tests.factories import make_pdf

        return make_pdf([f"{heading}\n{text}" for heading, text in document.sections])
    if document.kind == "docx":
        from tests.factories import make_docx

        return make_docx(document.sections)
    if document.kind == "html":
        body = "".join(f"<h2>{heading}</h2><p>{text}</p>" for heading, text in document.sections)
        return f"<html><body>{body}</body></html>".encode()
    if document.kind == "md":
        return "\n\n".join(f"## {heading}\n{text}" for heading, text in document.sections).encode()
    if document.kind in ("csv", "json"):
        return document.sections[0][1].encode()
    return "\n\n".join(f"{heading}\n{text}" for heading, text in document.sections).encode()
